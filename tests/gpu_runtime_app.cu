// gpu_runtime_app.cu: a CUDA runtime program (cudaMalloc, cudaMallocAsync) for `vram run` on a GPU
// machine; tests/gpu_run_check.sh builds it with nvcc and runs it with and without vram run.
#include <cstdio>
#include <cuda_runtime.h>

int main() {
    size_t free_bytes = 0, total = 0;
    cudaMemGetInfo(&free_bytes, &total);
    printf("cudaMemGetInfo total %zu MiB\n", total >> 20);
    void *a = nullptr, *b = nullptr, *c = nullptr;
    cudaError_t e1 = cudaMalloc(&a, 768u << 20);
    cudaError_t e2 = cudaMalloc(&b, 512u << 20);
    printf("cudaMalloc 768 MiB: %s; 512 MiB more: %s\n", cudaGetErrorName(e1), cudaGetErrorName(e2));
    cudaStream_t s;
    cudaStreamCreate(&s);
    cudaError_t e3 = cudaMallocAsync(&c, 512u << 20, s);
    cudaStreamSynchronize(s);
    printf("cudaMallocAsync 512 MiB more: %s\n", cudaGetErrorName(e3));
    return 0;
}
