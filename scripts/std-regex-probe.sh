#!/usr/bin/env bash
# Issue 32, deep-gemm's SIGSEGV: cuda-gdb put it in the construction of the std::regex of the
# kernel's run-time include parser (csrc/jit/include_parser.hpp), compiled in csrc/impl.cu.
# This builds that one regex four ways on the machine it runs on (nvcc with the kernel's
# flags, nvcc at C++17, the C++ compiler alone, nvcc without unique statics), each in a shared
# object, and runs each alone and after `import torch`. On the GPU machine it tells whether that machine's nvcc host pass
# (cudafe++ and its g++) miscompiles it, which is the kernel's choice of a .cu for host code,
# or whether the regex faults wherever it is built, which points at the process.
# Here (nvcc 13.0, g++ 12.2, torch 2.11.0+cu130) and on the GPU machine (nvcc 13.0, g++ 13.3.0,
# 2026-12-07) all eight runs print 2: the regex alone does not fault (COMPAT.md).
# Usage: bash scripts/std-regex-probe.sh [PYTHON]   (nvcc and g++ on PATH; with pip's nvcc, its
# lib/ directory in LIBRARY_PATH for libcudart)
set -uo pipefail
py=${1:-python3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat > "$work/rx.cu" <<'CU'
#include <regex>
#include <string>
extern "C" int run() {
    const std::string code = "#include <deep_gemm/common/utils.cuh>\n#include <cute/tensor.hpp>\n";
    const std::regex pattern(R"(#\s*include\s*[<"][^>"]+[>"])");
    std::sregex_iterator iter(code.begin(), code.end(), pattern), end;
    int n = 0;
    for (; iter != end; ++iter) n++;
    return n;
}
CU
g++ --version | head -1
nvcc --version | tail -1
nvcc -std=c++20 -O3 --expt-relaxed-constexpr --expt-extended-lambda -Xcompiler -fPIC -shared "$work/rx.cu" -o "$work/nvcc20.so"
nvcc -std=c++17 -O3 -Xcompiler -fPIC -shared "$work/rx.cu" -o "$work/nvcc17.so"
g++ -std=c++20 -O3 -fPIC -shared -x c++ "$work/rx.cu" -o "$work/gxx20.so"
# The same as nvcc20 without STB_GNU_UNIQUE: the function-local statics of libstdc++'s inline
# regex code stay the module's own instead of binding to the first copy the process loaded.
nvcc -std=c++20 -O3 --expt-relaxed-constexpr --expt-extended-lambda -Xcompiler -fPIC,-fno-gnu-unique -shared "$work/rx.cu" -o "$work/nvcc20nu.so"
for so in nvcc20 nvcc17 gxx20 nvcc20nu; do
    for pre in "" "import torch; "; do
        "$py" -c "${pre}import ctypes; print('$so', '${pre:+after torch}' or 'alone', ctypes.CDLL('$work/$so.so').run())"
        echo "  exit $?"
    done
done
# Which copies the regex code binds to after `import torch` (a template instance libtorch also
# exports would be interposed only if libtorch sits in the global scope), and which libstdc++
# the process maps: a module built against newer headers than the loaded libstdc++ shows here.
"$py" - "$work" <<'PY'
import ctypes, os, subprocess, sys
import torch
work = sys.argv[1]
libs = sorted({l.split()[-1] for l in open("/proc/self/maps") if "libstdc++" in l})
print("libstdc++ mapped after import torch:", libs)
PY
LD_DEBUG=bindings LD_DEBUG_OUTPUT="$work/bind" "$py" -c "import torch, ctypes; ctypes.CDLL('$work/nvcc20.so').run()"
echo "nvcc20.so's regex bindings, by the object that defines them:"
cat "$work"/bind.* | grep "binding file $work/nvcc20.so" | grep -E 'regex|_Compiler|_BracketMatcher|_Scanner|locale|ctype' \
    | sed -E 's/.* to ([^ ]+) .*/\1/' | sort | uniq -c
# The unique statics (nm's "u") both define, with their sizes: a size that differs is a layout
# that differs between this g++'s libstdc++ headers and the compiler torch was built with.
tp=$("$py" -c 'import torch, os; print(os.path.join(os.path.dirname(torch.__file__), "lib"))')
for f in "$work/nvcc20.so" "$tp/libtorch_python.so"; do
    echo "unique regex statics in $(basename "$f"):"
    nm -S -D --defined-only "$f" | awk '$3 == "u"' | grep -E 'regex|_AnyMatcher|_Executor' | c++filt | cut -c1-150
done
strings -a "$tp/libtorch_python.so" | grep -m1 'GCC: ('
echo "libtorch_cpu's exported regex symbols: $(nm -D --defined-only "$("$py" -c 'import torch, os; print(os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cpu.so"))')" | grep -c -E 'regex|_BracketMatcher')"
