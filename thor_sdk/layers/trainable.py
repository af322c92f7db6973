"""Which parameters a fine-tune trains: ``--trainable`` name patterns checked and applied to a model's parameters.

On a phone, training is most often fine-tuning: a pretrained backbone frozen, its classifier (or last stage, or
LoRA adapters) trained. A model file says so with ``requires_grad_(False)``; ``--trainable PATTERN`` says it for
any model without editing it (a zoo net, a file, an ONNX file's initializers): a parameter trains where its name
(``model.named_parameters()``'s, ``classifier.1.weight``; an ONNX initializer's) matches a pattern, and is frozen
otherwise. A pattern is a shell-style glob (``fnmatch``: ``*``, ``?``, ``[seq]``), matched against the whole name,
or a module's name, which matches every parameter under it (``classifier`` = ``classifier.*``). Every pattern must
match at least one parameter (a misspelt one is an error naming some of the parameters, never a model silently
trained whole or not at all).
"""

import fnmatch

from thor_sdk.errors import UsageError

#: patterns a user may give at most (a fine-tune names a few modules, not hundreds)
MAX_PATTERNS = 64
#: characters of one pattern at most
MAX_PATTERN_CHARS = 200


def check_patterns(patterns):
    """``patterns`` as a tuple of checked strings, or None when None or empty (train what the model says)."""
    if patterns is None:
        return None
    if isinstance(patterns, str):
        patterns = [patterns]
    try:
        patterns = list(patterns)
    except TypeError:
        raise UsageError(f"trainable must be name patterns (strings), got {type(patterns).__name__}") from None
    if not patterns:
        return None
    if len(patterns) > MAX_PATTERNS:
        raise UsageError(f"at most {MAX_PATTERNS} --trainable patterns, got {len(patterns)}")
    out = []
    for p in patterns:
        if not isinstance(p, str) or not p.strip():
            raise UsageError(f"a --trainable pattern must be a non-empty parameter name pattern, got {p!r}")
        if len(p) > MAX_PATTERN_CHARS or not p.isprintable():
            raise UsageError(f"--trainable pattern {p[:40]!r}...: at most {MAX_PATTERN_CHARS} printable characters")
        if p not in out:
            out.append(p)
    return tuple(out)


def matches(name, pattern):
    """Whether parameter ``name`` matches ``pattern``: the glob over the whole name, or a module's name (every
    parameter under it)."""
    return fnmatch.fnmatchcase(name, pattern) or name.startswith(pattern + ".")


def trained_names(names, patterns, what="the model"):
    """The subset of ``names`` (parameter names, in order) that ``patterns`` train; UsageError where a pattern
    matches none of them (naming a few, so a misspelling shows) or the model has no parameters."""
    names = list(names)
    if not names:
        raise UsageError(f"{what} has no parameters: --trainable has nothing to choose from")
    unmatched = [p for p in patterns if not any(matches(n, p) for n in names)]
    if unmatched:
        some = ", ".join(names if len(names) <= 5 else names[:4] + ["...", names[-1]])
        raise UsageError(f"--trainable {', '.join(repr(p) for p in unmatched)} "
                         f"{'matches' if len(unmatched) == 1 else 'match'} no parameter of {what} "
                         f"(its {len(names)} parameters are named like {some}; a pattern is a glob over the whole "
                         "name, or a module's name)")
    return [n for n in names if any(matches(n, p) for p in patterns)]


def apply_trainable(module, patterns, what="the model"):
    """Set ``requires_grad`` on every parameter of ``module``: True where its name matches one of ``patterns``
    (checked, ``check_patterns``), False elsewhere; nothing is changed when ``patterns`` is None. Returns
    ``{"trained": [names], "parameters": n}`` (None without patterns). A parameter shared by two modules is
    listed once, under its first name (``named_parameters``)."""
    patterns = check_patterns(patterns)
    if patterns is None:
        return None
    params = dict(module.named_parameters())
    keep = set(trained_names(params, patterns, what))
    for name, p in params.items():
        p.requires_grad_(name in keep)
    return {"trained": [n for n in params if n in keep], "parameters": len(params)}


def label(name, patterns):
    """How a model is named in results, campaigns and checks: a fine-tune (``patterns``) is not the model."""
    return f"{name} [trainable {','.join(patterns)}]" if patterns else name


def trained_in_part(trained, total, what="parameter tensors"):
    """Why a layer with ``trained`` of its ``total`` weights trained (a bias-only fine-tune, or patterns that
    match part of a layer) is estimated as trained, in words (the torch and ONNX readers alike)."""
    return (f"{trained} of its {total} {what} trained, the others frozen: estimated as trained (no probe measures "
            "a layer frozen in part)")

