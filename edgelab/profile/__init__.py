"""edgelab.profile"""
