"""Probing's pure half: collectors name what to gather in one exec per device, parsers turn the
raw outputs into facts (functions of text, so every corpus capture is a test).

The service that runs a probe (reach the device, classify, store the snapshot) sits above this
package, beside the other device operations: ``from edgelab.inventory.probe import probe_device,
probe_devices``. Nothing here imports the store, the catalog or the profile.
"""
