"""One error tree for everything thor-sdk raises on purpose.

Library code raises these; only the CLI turns them into a one-line ``Error: ...`` and an exit code:
2 for bad input (options, files, models: nothing was done), 1 for work that failed (a device, a
measurement, an export, the store).
Vendor and OS errors (subprocess failures, sysfs permission errors, NVML errors, onnxruntime
failures) are caught where they happen and re-raised as one of these, with the original chained.
"""


class ThorError(Exception):
    """Base class of every error thor-sdk raises deliberately."""

    exit_code = 1


class UsageError(ThorError):
    """Bad arguments: a batch size of 0, an unknown option value, a malformed input shape."""

    exit_code = 2


class InputError(ThorError):
    """An input of a command whose exit code 1 is a verdict (``check``: over budget) cannot be used: a
    malformed estimator, budgets file or model. Exit code 2, so it never reads as the verdict."""

    exit_code = 2


class MissingExtraError(ThorError, ModuleNotFoundError):
    """A command or function needs a module that only an optional extra installs (``pip install
    'thor-sdk[probe]'``). Exit code 2; also a ``ModuleNotFoundError`` (``.name``: the module), so
    ``except ImportError`` keeps working. ``.extra`` names the extra; ``thor_sdk.extras`` builds these."""

    exit_code = 2

    def __init__(self, extra, dist, what="thor-sdk", name=None):
        self.extra, self.dist = extra, dist
        super().__init__(f"{what} needs {dist}: pip install 'thor-sdk[{extra}]'", name=name or dist)


class NotFoundError(ThorError):
    """A file, model, layer kind, device or campaign that does not exist."""

    exit_code = 2


class ModelError(ThorError):
    """A model that cannot be built, traced or split into known layer kinds (an input error: exit code 2)."""

    exit_code = 2


class ModelCodeError(ModelError):
    """A model file's own code (``file.py:Class`` runs that file, as ``python file.py`` would) failed, or
    tried to end the program (``SystemExit``, a ``KeyboardInterrupt`` it raised itself), while it was
    imported, built or traced. Exit code 2."""

    exit_code = 2


class UnsupportedOperatorError(ModelError):
    """The model contains operators thor-sdk has no layer kind for."""

    def __init__(self, ops, source="model", hint=None):
        self.ops = sorted(set(ops))
        super().__init__(
            f"{source} uses operators with no thor-sdk layer kind: {', '.join(self.ops)} "
            f"(see `thor-sdk kinds`{'; ' + hint if hint else ''})"
        )


class FormatError(ThorError):
    """A file we read (estimator JSON, layer list, manifest, results, CSV) is corrupt or breaks its schema
    (an input error: exit code 2, as for bad options; 1 is left to failures of the work itself)."""

    exit_code = 2


class MeasurementError(ThorError):
    """A measurement could not be taken or is not trustworthy."""


class NoMeterError(MeasurementError):
    """Energy was asked for but no energy meter is readable on the device."""


class DeviceError(ThorError):
    """A device or transport failed: absent, unauthorized, offline, disconnected, command failed."""


class DeviceUnavailableError(DeviceError):
    """The device (or the tooling to reach it) is not present on this machine."""


class RemoteSudoError(DeviceError):
    """``sudo -n`` on a remote device refused: it wants a password, or the user may not use sudo."""


class RemoteThorSdkMissing(DeviceUnavailableError):
    """thor-sdk (or sudo) is not installed, or not on the PATH, on a remote device."""


class RemoteCommandError(DeviceError):
    """A command run on a remote device (its thor-sdk, its harness) failed; ``remote_exit_code`` is its exit
    status."""

    def __init__(self, message, remote_exit_code):
        super().__init__(message)
        self.remote_exit_code = remote_exit_code


class ExportError(ThorError):
    """A model could not be exported, or the export failed verification."""


class StoreError(ThorError):
    """A campaign database is unreadable or inconsistent."""


class NotOurFileError(FormatError, StoreError):
    """A file handed to thor-sdk as one of its own (campaign database, estimator, bundle, prior, report) is
    not one: another program's file, or its format tag is missing. A FormatError (a bad input: exit 2);
    also a StoreError, which a campaign database that is not one raised before."""


class TransportDisconnected(DeviceError):
    """The connection to the device dropped (cable pulled, device rebooted, network down)."""


class NotFittedError(UsageError):
    """A baseline was asked for an estimate before ``fit`` (or before its fitted state was loaded)."""


class InfeasibleCapError(UsageError):
    """No (batch size, frequency) in the table stays under the power cap."""

    def __init__(self, power_cap_w, lowest_feasible_power_w, where="the table"):
        self.power_cap_w = power_cap_w
        self.lowest_feasible_power_w = lowest_feasible_power_w
        super().__init__(
            f"power cap {power_cap_w:g} W is infeasible: the lowest peak power in {where} is "
            f"{lowest_feasible_power_w:.3f} W (give a cap of at least that)"
        )
