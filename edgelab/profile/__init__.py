"""edgelab.profile: facts + device catalog (+ pipeline) -> device class and a deploy profile with reasons.

from edgelab.profile import classify, derive_profile
profile = derive_profile(facts, load_devices(), "qwen3-tts-1.7b")
print("\\n".join(profile.explain()))
"""

from edgelab.profile.classify import Classification, classify
from edgelab.profile.derive import DeployProfile, PipelineProfile, derive_profile, profile_from_facts
from edgelab.profile.device import Rule

__all__ = [
    "Classification",
    "DeployProfile",
    "PipelineProfile",
    "Rule",
    "classify",
    "derive_profile",
    "profile_from_facts",
]
