"""edgelab.catalog"""
