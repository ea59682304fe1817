"""edgelab.deploy"""
