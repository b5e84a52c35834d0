# Describe the public functions and layers of a built kernel variant as symbols.json
# (schema_version 1, what `kernels describe-api` of kernels >= 0.18.3 reads).
#
# Run by kernel-builder with the Python of the cell that built the variant:
#   python -B symbols.py VARIANT_DIR MODULE_NAME FRAMEWORK FRAMEWORK_DIR OUTPUT
# It imports FRAMEWORK (`torch` or `tvm_ffi`) and exits with status 3, printing why, when that
# is not the one the cell was built against (FRAMEWORK_DIR); then imports the variant as the
# package MODULE_NAME (the metadata id, as the loader names it), exiting with status 4 and the
# exception when that fails, and writes OUTPUT. Nothing
# exported is called or instantiated. Memory addresses in reprs (`<object at 0x7f…>`) are
# removed, so that the file is the same on every build.
import importlib
import importlib.util
import inspect
import json
import os
import re
import sys

sys.dont_write_bytecode = True
NOT_THIS_FRAMEWORK = 3
DOES_NOT_IMPORT = 4
ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def stable(text):
    return ADDRESS.sub("", text)


def signature_of(obj):
    try:
        sig = inspect.signature(obj, eval_str=False)
    except (TypeError, ValueError):
        return None
    empty = inspect.Parameter.empty

    def annotation(a):
        return None if a is empty else stable(inspect.formatannotation(a))

    params = []
    for p in sig.parameters.values():
        params.append(
            {
                "name": p.name,
                "kind": p.kind.name,
                "default": None if p.default is empty else stable(repr(p.default)),
                "annotation": annotation(p.annotation),
            }
        )
    return {"parameters": params, "return_annotation": annotation(sig.return_annotation)}


def describe(name, obj):
    entry = {
        "name": name,
        "qualname": obj.__qualname__,
        "module": obj.__module__,
        "kind": "class" if inspect.isclass(obj) else "function",
        "doc": inspect.getdoc(obj),
        "signature": signature_of(obj),
    }
    if inspect.isclass(obj):
        flags = {}
        for flag in ("has_backward", "can_torch_compile"):
            value = getattr(obj, flag, None)
            flags[flag] = value if isinstance(value, bool) else None
        entry["attributes"] = flags
    return entry


def exported(module, wanted):
    names = getattr(module, "__all__", ())
    if not isinstance(names, (list, tuple)) or any(not isinstance(n, str) for n in names):
        raise SystemExit(f"`{module.__name__}.__all__` must be a list or tuple of strings")
    out = []
    seen = set()
    for name in names:
        if name in seen or name.startswith("_") or name == "layers":
            continue
        seen.add(name)
        if not hasattr(module, name):
            raise SystemExit(f"`{module.__name__}.__all__` names `{name}`, which the module does not define")
        obj = getattr(module, name)
        if not wanted(obj) or "_private_for_testing" in obj.__module__.split("."):
            continue
        out.append(describe(name, obj))
    return out


def main():
    variant_dir, module_name, framework, framework_dir, output = sys.argv[1:6]
    try:
        fw = importlib.import_module(framework)
    except Exception as e:  # noqa: BLE001 - any failure means: not this framework
        print(f"`{framework}` does not import ({type(e).__name__}: {e})")
        sys.exit(NOT_THIS_FRAMEWORK)
    found = os.path.realpath(os.path.dirname(fw.__file__))
    if found != os.path.realpath(framework_dir):
        print(f"`{framework}` imports from `{found}`, not from the cell's `{framework_dir}`")
        sys.exit(NOT_THIS_FRAMEWORK)

    init = os.path.join(variant_dir, "__init__.py")
    spec = importlib.util.spec_from_file_location(module_name, init, submodule_search_locations=[variant_dir])
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException as e:  # noqa: BLE001 - reported, the build goes on without the file
        print(f"{type(e).__name__}: {e}")
        sys.exit(DOES_NOT_IMPORT)

    layers = getattr(module, "layers", None)
    symbols = {
        "schema_version": 1,
        "module": module.__name__,
        "functions": exported(module, inspect.isfunction),
        "layers": exported(layers, inspect.isclass) if inspect.ismodule(layers) else [],
    }
    text = json.dumps(symbols, indent=2, ensure_ascii=False) + "\n"
    with open(output, "w", encoding="utf-8") as f:
        f.write(text)


main()
