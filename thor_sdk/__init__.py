"""thor-sdk: estimate and measure what training a neural network on a device costs.

The public API is re-exported lazily so that ``import thor_sdk`` (and ``thor-sdk --help``) stays
fast: torch, scikit-learn and onnx are imported only by the functions that need them.

>>> import thor_sdk
>>> layers = thor_sdk.layers_of("lenet5")                       # doctest: +SKIP
>>> est = thor_sdk.load_estimator("host-estimator.json")        # doctest: +SKIP
>>> est.estimate(layers, batch_size=32)["total"]                # doctest: +SKIP
"""

__version__ = "0.1.0"

_LAZY = {
    # name: (module, attribute)
    "ThorError": ("thor_sdk.errors", "ThorError"),
    "list_models": ("thor_sdk.models", "list_models"),
    "build_model": ("thor_sdk.models", "build_model"),
    "layers_of": ("thor_sdk.layers", "layers_of"),
    "list_kinds": ("thor_sdk.layers.kinds", "list_kinds"),
    "probe": ("thor_sdk.api", "probe"),
    "probe_fleet": ("thor_sdk.api", "probe_fleet"),
    "profile_fleet": ("thor_sdk.api", "profile_fleet"),
    "profile": ("thor_sdk.api", "profile"),
    "profile_summary": ("thor_sdk.api", "profile_summary"),
    "fit": ("thor_sdk.api", "fit"),
    "estimate": ("thor_sdk.api", "estimate"),
    "measure_level": ("thor_sdk.api", "measure_level"),
    "check": ("thor_sdk.check", "check"),
    "measure": ("thor_sdk.api", "measure"),
    "prune_plan": ("thor_sdk.prune", "prune_plan"),
    "load_estimator": ("thor_sdk.runtime", "load_estimator"),
    "get_device": ("thor_sdk.devices", "get_device"),
    # power-aware training (docs/power-aware-training.md)
    "table_profile": ("thor_sdk.api", "table_profile"),
    "table_ratios": ("thor_sdk.api", "table_ratios"),
    "table_build": ("thor_sdk.api", "table_build"),
    "table_select": ("thor_sdk.api", "table_select"),
    "train": ("thor_sdk.api", "train"),
    "replay": ("thor_sdk.api", "replay"),
    "reset_frequency": ("thor_sdk.api", "reset_frequency"),
}

__all__ = ["__version__", *_LAZY]


def __getattr__(name):
    try:
        module, attr = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'thor_sdk' has no attribute {name!r}") from None
    import importlib

    return getattr(importlib.import_module(module), attr)
