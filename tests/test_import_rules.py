"""The package's import rules, checked on the source of every module under ``jaxpriv/``.

1. No module imports another module's private name: ``from m import _x`` and ``m._x`` (``m`` bound to a
   module of the package) are errors wherever they occur, at the top of a file or inside a function.
   Private *modules* (``_numerics``, ``_saved_programs``, ``_checks``, ``_batching``, ``_lazy``, ``_reference``,
   ``_docs``, ``mechanisms/_common``) are shared infrastructure: their public names are for every module. What
   another module needs is public and documented, or it lives in the module it belongs to.
2. No import runs up the layers of :data:`LAYERS`: a module imports from its own layer and the ones
   below it, never from a higher one. Function-level (lazy) imports count like top-level ones: a lazy
   import breaks an import cycle at load time, not the dependency.

   An import also runs the ``__init__`` of every package above its target: ``from ..mechanisms import
   staircase`` runs ``mechanisms/__init__``, so that ``__init__`` counts as imported too (a package
   ``__init__`` that eagerly imported a higher layer would be a hidden cycle). The root ``jaxpriv``
   package is the exception: it loads its submodules lazily, and a test checks that it stays so.
3. Private names of third-party packages are allowed only where :data:`THIRD_PARTY_PRIVATE` lists them,
   each with its reason.

Not modelled: ``importlib.import_module`` by name (the lazy package attributes of :mod:`jaxpriv._lazy`,
and :mod:`jaxpriv.reproduce` running its system modules): loading by name on first use is how a package
``__init__`` exposes a higher-layer submodule without importing it.
"""

from __future__ import annotations

import ast
import pathlib

import pytest

PACKAGE = "jaxpriv"
SOURCE = pathlib.Path(__file__).resolve().parents[1] / PACKAGE

#: Layers, lowest first: (name, modules). A module may import from its own layer and the layers below.
#: An entry is a module ("jaxpriv.calibrate"; a package's entry is its ``__init__``) or "pkg.*", the
#: submodules of ``pkg`` that have no entry of their own. A package's ``__init__`` re-exports its
#: submodules, so it sits with the highest of them. Every module must have a layer (test below).
LAYERS = [
    # numerics, validation, batching, lazy loading, the MATH reference, and the two no-JAX specifications
    ("infrastructure", ["jaxpriv._checks", "jaxpriv._numerics", "jaxpriv._saved_programs", "jaxpriv._tiers",
                        "jaxpriv._batching",
                        "jaxpriv._lazy", "jaxpriv._docs", "jaxpriv._reference", "jaxpriv.schedule",
                        "jaxpriv.budgets", "jaxpriv.distributed"]),
    # privacy curves (RDP, f-DP)
    ("curves", ["jaxpriv.rdp", "jaxpriv.rdp.*", "jaxpriv.fdp"]),
    # the noise mechanisms (samplers, densities, their own curves), shared by every caller
    ("mechanisms", ["jaxpriv.mechanisms", "jaxpriv.mechanisms.*"]),
    # correlated-noise strategies (matrix factorizations: jax/numpy math, no events, no accountants)
    ("strategies", ["jaxpriv.mf", "jaxpriv.mf.*"]),
    # shuffling's amplification kernels: closed-form bounds, clones, Poisson-binomial, the lattice, estimators
    ("shuffle kernels", ["jaxpriv.shuffle", "jaxpriv.shuffle.*"]),
    # the event types, each declared once: ranges, RDP curve, PLD law, dp_accounting mapping
    ("events", ["jaxpriv.events", "jaxpriv.events.*"]),
    # the accountants, which read the mechanisms' and shuffling's curves
    ("accounting", ["jaxpriv.accounting", "jaxpriv.accounting.*", "jaxpriv.accountant"]),
    # what solves with or composes the accountants: calibration, the Harmonizer, shuffled rounds and their summary
    # (jaxpriv.mechanisms.harmonizer, jaxpriv.shuffle.rounds and jaxpriv.shuffle.summary: deprecated aliases of
    # their calibrate/ modules, kept for old imports; a test below checks that they hold nothing else)
    ("calibration", ["jaxpriv.calibrate", "jaxpriv.calibrate.*", "jaxpriv.mechanisms.harmonizer",
                     "jaxpriv.shuffle.rounds", "jaxpriv.shuffle.summary"]),
    # DP-SGD: data, sampling, clipping, noise, the trainer
    ("train", ["jaxpriv.train", "jaxpriv.train.*"]),
    # the seed systems: their clients, aggregators, accounting and builders
    ("federated", ["jaxpriv.federated", "jaxpriv.federated.*"]),
    # auditing: empirical lower bounds on ε from canaries, samplers and runs of the trainer
    ("audit", ["jaxpriv.audit", "jaxpriv.audit.*"]),
    # the papers' tables, figures and constants, regenerated from the library (reproduce runs its system
    # modules by name); nothing in the library imports it, only the command line
    ("reproduction", ["jaxpriv.reproduce", "jaxpriv.reproduce.*"]),
    # front ends: the package's lazy namespace (and __version__), the report and the command line
    ("front ends", ["jaxpriv", "jaxpriv.report", "jaxpriv.cli", "jaxpriv.cli.*", "jaxpriv.__main__"]),
]

#: (importing module, imported private third-party name) → why there is no public alternative.
THIRD_PARTY_PRIVATE = {
    # the active JAX traces, to tell a leaked tracer from a live one; jax.core exposes no accessor
    ("jaxpriv._numerics", "jax._src.core"): "the trace stack has no public accessor",
    # flax's own conversion of an nnx.Conv's layout, so the per-example convolution matches it exactly
    ("jaxpriv.train._ghost", "flax.nnx.nn.linear._conv_dimension_numbers"): "nnx.Conv's layout, no public API",
    # jax.export's lowering of a call sets up jaxlib's LAPACK kernels (importing scipy.linalg, ~0.26 s) for
    # every exported CPU program; a saved program that calls no LAPACK routine skips it (guarded: absent, kept)
    ("jaxpriv._saved_programs", "jax._src.export._export"): "jax.export's LAPACK set-up has no public switch",
}

_LAYER = {entry: index for index, (_, entries) in enumerate(LAYERS) for entry in entries}


def _modules() -> dict[str, pathlib.Path]:
    found = {}
    for path in sorted(SOURCE.rglob("*.py")):
        parts = list(path.relative_to(SOURCE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


MODULES = _modules()


def layer_of(module: str) -> int | None:
    """The layer index of ``module``: its own entry, else the nearest enclosing "pkg.*" entry."""
    if module in _LAYER:
        return _LAYER[module]
    parts = module.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        wildcard = ".".join(parts[:cut]) + ".*"
        if wildcard in _LAYER:
            return _LAYER[wildcard]
    return None


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _absolute(module: str, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    package = module.split(".")
    if MODULES[module].name != "__init__.py":
        package = package[:-1]
    package = package[:len(package) - (node.level - 1)]
    return ".".join(package + ([node.module] if node.module else []))


def _scan(module: str):
    """(imports, private uses, third-party private imports) of ``module``.

    imports: (line, target module); private uses: (line, "module.name"); third party: (line, "module.name").
    """
    path = MODULES[module]
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    imports, private, third_party, bound = [], [], [], {}  # bound: local name → module it names
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == PACKAGE:
                    imports.append((node.lineno, alias.name))
                    bound[alias.asname or PACKAGE] = alias.name if alias.asname else PACKAGE
                elif any(_is_private(part) for part in alias.name.split(".")):
                    third_party.append((node.lineno, alias.name))
        elif isinstance(node, ast.ImportFrom):
            source = _absolute(module, node)
            ours = source.split(".")[0] == PACKAGE
            for alias in node.names:
                submodule = f"{source}.{alias.name}"
                if ours and submodule in MODULES:  # a module, bound as a name
                    imports.append((node.lineno, submodule))
                    bound[alias.asname or alias.name] = submodule
                elif ours:
                    imports.append((node.lineno, source))
                    if _is_private(alias.name) and source != module:
                        private.append((node.lineno, submodule))
                elif any(_is_private(part) for part in submodule.split(".")):
                    third_party.append((node.lineno, submodule))
    for node in ast.walk(tree):  # m._x, pkg.m._x: attributes of names bound to the package's modules
        if not isinstance(node, ast.Attribute):
            continue
        names, inner = [], node
        while isinstance(inner, ast.Attribute):
            names.append(inner.attr)
            inner = inner.value
        if not (isinstance(inner, ast.Name) and inner.id in bound):
            continue
        target, names = bound[inner.id], names[::-1]
        for depth, name in enumerate(names):
            if f"{target}.{name}" in MODULES:
                target = f"{target}.{name}"
                continue
            # only the node whose own attribute this is reports it (the outer nodes of m._x.y do not)
            if depth == len(names) - 1 and _is_private(name) and target != module:
                private.append((node.lineno, f"{target}.{name}"))
            break
    return imports, private, third_party


SCANS = {module: _scan(module) for module in MODULES}


def test_every_module_has_a_layer_and_every_entry_a_module():
    unplaced = sorted(module for module in MODULES if layer_of(module) is None)
    assert not unplaced, f"modules with no layer in LAYERS (place them): {unplaced}"
    stale = sorted(entry for entry in _LAYER
                   if entry.removesuffix(".*") not in MODULES)
    assert not stale, f"LAYERS entries naming no module: {stale}"


def test_a_module_outside_its_folders_layer_is_only_a_deprecated_alias():
    """Folders are layers: a module placed in a layer other than its package's is a deprecated alias of the
    module that moved (imports, ``__all__`` and a DeprecationWarning), never code of its own."""
    for module in MODULES:
        package = module.rsplit(".", 1)[0]
        if module in _LAYER and layer_of(package + ".*") not in (None, layer_of(module)):
            tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
            kinds = {type(node) for node in tree.body}
            assert kinds <= {ast.Import, ast.ImportFrom, ast.Assign, ast.Expr}, f"{module} holds code of its own"
            assert "DeprecationWarning" in MODULES[module].read_text(encoding="utf-8"), f"{module} is not deprecated"


def test_no_module_imports_another_modules_private_name():
    found = [f"{MODULES[module].relative_to(SOURCE.parent)}:{line}: {name}"
             for module, (_, private, _) in SCANS.items() for line, name in private]
    assert not found, "private names used across modules (make them public and documented, or move them):\n" + \
        "\n".join(found)


def runs(target: str) -> list[str]:
    """What importing ``target`` runs: ``target`` and the ``__init__`` of every package above it (the root
    package excepted, see the module docstring)."""
    parts = target.split(".")
    return [target] + [".".join(parts[:cut]) for cut in range(len(parts) - 1, 1, -1)]


def test_no_import_runs_up_the_layers():
    found = []
    for module, (imports, _, _) in SCANS.items():
        own = layer_of(module)
        for line, target in {(line, ran) for line, target in imports for ran in runs(target)}:
            theirs = layer_of(target)
            if theirs is not None and theirs > own:
                found.append(f"{MODULES[module].relative_to(SOURCE.parent)}:{line}: {module} "
                             f"({LAYERS[own][0]}) imports {target} ({LAYERS[theirs][0]})")
    assert not found, "imports from a higher layer:\n" + "\n".join(sorted(found))


def test_the_root_package_loads_its_submodules_lazily():
    """The one package whose ``__init__`` the rule above does not count: it may import infrastructure only."""
    imports, _, _ = SCANS[PACKAGE]
    eager = [target for _, target in imports if layer_of(target) != 0]
    assert not eager, f"jaxpriv/__init__.py imports {eager} eagerly (use jaxpriv._lazy)"


def test_an_import_runs_the_packages_above_it():
    assert runs("jaxpriv.mechanisms.staircase") == ["jaxpriv.mechanisms.staircase", "jaxpriv.mechanisms"]
    assert runs("jaxpriv.events") == ["jaxpriv.events"]


def test_third_party_private_names_are_listed_with_a_reason():
    found = [f"{MODULES[module].relative_to(SOURCE.parent)}:{line}: {name}"
             for module, (_, _, third_party) in SCANS.items() for line, name in third_party
             if (module, name) not in THIRD_PARTY_PRIVATE]
    assert not found, "third-party private names not in THIRD_PARTY_PRIVATE:\n" + "\n".join(found)


@pytest.mark.parametrize("source, expected", [
    ("from jaxpriv.shuffle.bounds import _echo_factors\n", ["jaxpriv.shuffle.bounds._echo_factors"]),
    ("from ..train import data\nx = data._read('digits')\n", ["jaxpriv.train.data._read"]),
    ("import jaxpriv.fdp as f\ndef g():\n    return f._kernel\n", ["jaxpriv.fdp._kernel"]),
    ("import jaxpriv\ny = jaxpriv.train.dpsgd._seeds\n", ["jaxpriv.train.dpsgd._seeds"]),
    ("from .. import __version__\nfrom .._numerics import float64\nfrom . import _common\n", []),
], ids=["from-import", "module-attribute", "aliased-in-function", "dotted-chain", "allowed"])
def test_the_scanner_sees_private_names(source, expected, tmp_path, monkeypatch):
    """The checks above are only as good as the scanner: it must see each way of reaching a private name."""
    path = tmp_path / "probe.py"
    path.write_text(source, encoding="utf-8")
    monkeypatch.setitem(MODULES, "jaxpriv.mechanisms.probe", path)
    _, private, _ = _scan("jaxpriv.mechanisms.probe")
    assert [name for _, name in private] == expected


def test_the_scanner_sees_an_upward_import(tmp_path, monkeypatch):
    path = tmp_path / "probe.py"
    path.write_text("def f():\n    from ..calibrate import shuffle_rounds\n    return shuffle_rounds\n",
                    encoding="utf-8")
    monkeypatch.setitem(MODULES, "jaxpriv.mechanisms.probe", path)
    imports, _, _ = _scan("jaxpriv.mechanisms.probe")
    assert [target for _, target in imports] == ["jaxpriv.calibrate.shuffle_rounds"]
    assert layer_of("jaxpriv.calibrate.shuffle_rounds") > layer_of("jaxpriv.mechanisms.probe")


#: packages whose programs keep XLA's default options: the trainer and what runs models (convolutions and
#: matrix products), not long chains of elementwise float64 math; and kernel_jit's own modules (_numerics,
#: and _saved_programs, which jits a saved kernel with the options kernel_jit hands it)
_DEFAULT_JIT = ("jaxpriv.train", "jaxpriv.federated", "jaxpriv.reproduce", "jaxpriv.mf", "jaxpriv._numerics",
                "jaxpriv._saved_programs", "jaxpriv._tiers")


def test_numerical_kernels_compile_through_kernel_jit():
    """Every jit of the accounting, curve, mechanism and shuffle code goes through _numerics.kernel_jit (its
    compiler options), so that no kernel silently compiles with the slower defaults."""
    direct = [name for name, path in MODULES.items() if not name.startswith(_DEFAULT_JIT)
              and "jax.jit" in path.read_text()]
    assert direct == [], f"use _numerics.kernel_jit instead of jax.jit in {direct}"
