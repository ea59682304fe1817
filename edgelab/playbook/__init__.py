"""edgelab.playbook"""
