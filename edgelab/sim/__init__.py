"""edgelab.sim"""
