#!/usr/bin/env bash
# Issue 32, deep-gemm's SIGSEGV: cuda-gdb put it in the construction of the std::regex of the
# kernel's run-time include parser (csrc/jit/include_parser.hpp), compiled in csrc/impl.cu.
# This builds that one regex three ways on the machine it runs on (nvcc with the kernel's
# flags, nvcc at C++17, the C++ compiler alone), each in a shared object, and runs each alone
# and after `import torch`. On the GPU machine it tells whether that machine's nvcc host pass
# (cudafe++ and its g++) miscompiles it, which is the kernel's choice of a .cu for host code,
# or whether the regex faults wherever it is built, which points at the process.
# Here (nvcc 13.0, g++ 12.2, torch 2.11.0+cu130) all six runs print 2.
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
for so in nvcc20 nvcc17 gxx20; do
    for pre in "" "import torch; "; do
        "$py" -c "${pre}import ctypes; print('$so', '${pre:+after torch}' or 'alone', ctypes.CDLL('$work/$so.so').run())"
        echo "  exit $?"
    done
done
