"""Simulated transformers (see sparktui/sim/support.py): its version and AutoConfig's answer on a model
directory, as the support check asks them. The message is transformers' own (models/auto/configuration_auto.py)."""

import json as _json
import os as _os

from sparktui.sim.support import model_types as _types, transformers_version as _version

__version__ = _version()


class AutoConfig:
    @classmethod
    def from_pretrained(cls, path, **kwargs):
        with open(_os.path.join(path, "config.json"), encoding="utf-8") as f:
            cfg = _json.load(f)
        mt = cfg.get("model_type")
        if mt not in _types():
            raise ValueError(
                f"The checkpoint you are trying to load has model type `{mt}` but Transformers does not recognize "
                "this architecture. This could be because of an issue with the checkpoint, or because your "
                "version of Transformers is out of date."
            )
        return cfg
