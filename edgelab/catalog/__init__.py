"""edgelab.catalog: the device catalog (``devices/*.yaml``) and pipeline specs, validated with file:line errors.

from edgelab.catalog import load_devices, load_pipelines
"""

from edgelab.catalog.devices import DEVICE_CLASSES, DeviceCatalog, DeviceEntry, load_devices
from edgelab.catalog.pipelines import PipelineSpec, load_pipeline, load_pipelines

__all__ = [
    "DEVICE_CLASSES",
    "DeviceCatalog",
    "DeviceEntry",
    "PipelineSpec",
    "load_devices",
    "load_pipeline",
    "load_pipelines",
]
