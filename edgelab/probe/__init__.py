"""edgelab.probe"""
