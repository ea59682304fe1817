"""One screen per file: fleet, device, run, deploy dialog, add-device dialog, matrix."""
