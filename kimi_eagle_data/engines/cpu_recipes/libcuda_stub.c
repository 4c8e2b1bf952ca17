/* A stand-in for the NVIDIA driver library, for CPU machines only.
 * sglang-kernel's common_ops.so links against libcuda.so.1 but, with
 * --attention-backend torch_native on CPU, never calls a kernel. The loader
 * only needs the library and these symbols to exist; every call reports
 * CUDA_ERROR_NO_DEVICE (100) so any code that does probe the driver sees
 * "no GPU" instead of crashing. */
typedef int CUresult;
#define CUDA_ERROR_NO_DEVICE 100

CUresult cuInit(unsigned int flags) { (void)flags; return CUDA_ERROR_NO_DEVICE; }
CUresult cuDriverGetVersion(int *version) { if (version) *version = 0; return CUDA_ERROR_NO_DEVICE; }
CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, unsigned long long flags) {
    (void)symbol; (void)version; (void)flags; if (pfn) *pfn = 0; return CUDA_ERROR_NO_DEVICE;
}
CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, unsigned long long flags, void *status) {
    (void)symbol; (void)version; (void)flags; (void)status; if (pfn) *pfn = 0; return CUDA_ERROR_NO_DEVICE;
}
CUresult cuPointerGetAttribute(void *data, int attribute, unsigned long long ptr) {
    (void)data; (void)attribute; (void)ptr; return CUDA_ERROR_NO_DEVICE;
}
