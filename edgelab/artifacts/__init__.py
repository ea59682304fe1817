"""edgelab.artifacts"""
