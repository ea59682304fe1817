"""edgelab.metrics"""
