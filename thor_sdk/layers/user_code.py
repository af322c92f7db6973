"""Model files are code: ``file.py:Class`` is imported and built here, its failures and exits made one ModelCodeError.

Loading ``my_net.py:Net`` runs every statement of ``my_net.py`` with the user's rights, exactly as
``python my_net.py`` would (then ``Net()``, then its ``forward``); only load model files you trust.
Whatever that code raises while it is imported, built, traced (``layers_of``) or measured (``measure``)
-- an exception, ``SystemExit`` (``sys.exit()``, ``exit()``), a ``KeyboardInterrupt`` it raises itself --
becomes one ``ModelCodeError`` (exit code 2), so the command never ends silently with exit 0. A real Ctrl-C at the terminal during that time still interrupts.
"""

import contextlib
import os

from thor_sdk.errors import ModelCodeError, NotFoundError, ThorError


def _first_line(e):
    text = str(e).strip()
    return text.splitlines()[0][:300] if text else ""


def _describe(e):
    if isinstance(e, SystemExit):
        return f"it called sys.exit({e.code!r})" if e.code is not None else "it called sys.exit()"
    msg = _first_line(e)
    return f"{type(e).__name__}: {msg}" if msg else type(e).__name__


@contextlib.contextmanager
def running_user_code(what):
    """``with running_user_code("importing my_net.py"):`` run a model file's code; anything it raises,
    ``BaseException`` included, becomes one ModelCodeError naming ``what`` -- except a real SIGINT
    (Ctrl-C) received meanwhile, which is re-raised as the interrupt it is."""
    import signal
    import threading

    interrupted = []
    previous = None
    if threading.current_thread() is threading.main_thread() \
            and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        def on_sigint(signum, frame):
            interrupted.append(signum)
            signal.default_int_handler(signum, frame)

        previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        yield
    except ThorError:  # already one of ours (a bad shape found while tracing, say): as it is
        raise
    except KeyboardInterrupt as e:
        if interrupted:
            raise
        raise ModelCodeError(f"{what}: the model's own code raised KeyboardInterrupt"
                             + (f" ({_first_line(e)})" if _first_line(e) else "")
                             + "; model files are code, run as `python file.py` would") from None
    except Exception as e:
        raise ModelCodeError(f"{what}: {_describe(e)}") from e
    except BaseException as e:  # SystemExit, or another non-Exception the user's code raised
        raise ModelCodeError(f"{what}: {_describe(e)}; model files are code, run as `python file.py` "
                             "would") from None
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)


def load_module_from_file(ref):
    """``path/to/file.py:ClassName`` -> an instance built with no arguments. Runs the file's code."""
    import importlib.util

    path, _, cls_name = ref.rpartition(":")
    if not os.path.isfile(path):
        raise NotFoundError(f"no such model file: {path}")
    spec = importlib.util.spec_from_file_location(f"thor_user_model_{abs(hash(path))}", path)
    if spec is None or spec.loader is None:
        raise ModelCodeError(f"could not import {path}: not a Python source file")
    module = importlib.util.module_from_spec(spec)
    with running_user_code(f"could not import {path}"):
        spec.loader.exec_module(module)
    cls = getattr(module, cls_name, None)
    if cls is None:
        raise NotFoundError(f"{path} has no attribute {cls_name!r}")
    with running_user_code(f"could not build {ref} with no arguments"):
        return cls()
