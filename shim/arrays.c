/*
 * arrays.c: the interposed CUDA array calls (cudaMallocArray, cudaMalloc3DArray and
 * cudaMallocMipmappedArray of the runtime): cuArrayCreate and cuArray3DCreate (their _v2 forms and
 * the CUDA < 3.2 ones with 32-bit dimensions), cuMipmappedArrayCreate, cuArrayDestroy and
 * cuMipmappedArrayDestroy. An array is counted on the current context's device, by record (table.c,
 * kinds ARRAY and MIPMAP), from its creation until its destruction.
 *
 * Its size is what its texels take: width x height x depth (or layers; a cubemap's 6 faces) x the
 * format's bytes per texel, summed over the levels of a mipmapped array, rounded up to 512 bytes
 * (the driver's texture alignment). Block-compressed formats count their 4 x 4 blocks, YUV formats
 * their planes (NV12: 1.5 bytes a pixel), a format this table does not know 16 bytes a texel (the
 * widest known). The driver's own layout may add padding, which is not counted. Sparse and
 * deferred-mapping arrays hold no memory of their own: their tiles are cuMemCreate memory, counted
 * there, and held until the array is destroyed (allocs.c's pins, dropped here).
 *
 * Invariants: as calls.c's (a refusal does not call the driver; a record is dropped only after the
 * driver destroyed the array, and put back when it refused). No lock is taken here.
 */
#include <stdint.h>

#include "shim.h"

#define SHIM_TEXTURE_ALIGN 512u

/* Twice the bytes of one texel (4:2:0 formats take 1.5 bytes), and whether the format is
 * block-compressed (4 x 4 texels a block). */
static unsigned shim_texel_bytes2(unsigned format, unsigned channels, int *blocks) {
    unsigned ch = channels ? channels : 1;
    *blocks = 0;
    switch (format) {
    case 0x01: case 0x08: return 2 * ch;                        /* 8-bit integers */
    case 0x02: case 0x09: case 0x10: return 4 * ch;             /* 16-bit integers, half */
    case 0x03: case 0x0a: case 0x20: return 8 * ch;             /* 32-bit integers, float */
    case 0xc0: case 0xc6: return 2;                             /* (s|u)norm int8 x1 */
    case 0xc1: case 0xc7: case 0xc3: case 0xc9: return 4;       /* int8 x2, int16 x1 */
    case 0xc2: case 0xc8: case 0xc4: case 0xca: case 0x50: return 8;   /* int8 x4, int16 x2, 10-10-10-2 */
    case 0xc5: case 0xcb: return 16;                            /* int16 x4 */
    case 0x91: case 0x92: case 0x97: case 0x98:                 /* BC1, BC4: 8 bytes a block */
        *blocks = 1;
        return 1;
    case 0x93: case 0x94: case 0x95: case 0x96: case 0x99:      /* BC2, BC3, BC5, BC6H, BC7: 16 */
    case 0x9a: case 0x9b: case 0x9c: case 0x9d: case 0x9e:
        *blocks = 1;
        return 2;
    case 0xb0: return 3;                                        /* NV12 */
    case 0x9f: case 0xa1: return 6;                             /* P010, P016 */
    case 0xa2: case 0xa5: return 4;                             /* NV16, YUY2 */
    case 0xa3: case 0xa4: case 0xa6: case 0xa7: case 0xa8: case 0xa9: return 8;   /* P210, P216, Y210, Y216, AYUV, Y410 */
    case 0xb1: return 16;                                       /* Y416 */
    case 0xb2: case 0xb4: return 6;                             /* 4:4:4 8-bit planar, semi-planar */
    case 0xb3: case 0xb5: return 12;                            /* 4:4:4 10/16-bit */
    default: return 32;                                         /* unknown: 16 bytes a texel */
    }
}

/* a x b, saturated */
static size_t shim_mul(size_t a, size_t b) { return b && a > SIZE_MAX / b ? SIZE_MAX : a * b; }

/* The bytes of one level of w x h x d texels. */
static size_t shim_level_bytes(size_t w, size_t h, size_t d, unsigned format, unsigned channels) {
    int blocks = 0;
    size_t b2 = shim_texel_bytes2(format, channels, &blocks);
    if (w == 0) w = 1;
    if (h == 0) h = 1;
    if (d == 0) d = 1;
    if (blocks) {
        w = w > SIZE_MAX - 3 ? SIZE_MAX : (w + 3) & ~(size_t)3;
        h = h > SIZE_MAX - 3 ? SIZE_MAX : (h + 3) & ~(size_t)3;
    }
    size_t twice = shim_mul(shim_mul(shim_mul(w, h), d), b2);
    return twice == SIZE_MAX ? SIZE_MAX : (twice + 1) / 2;
}

/* What an array of these dimensions takes: every level of a mipmapped one (levels >= 1). */
static size_t shim_array_bytes(size_t w, size_t h, size_t d, unsigned format, unsigned channels, unsigned flags,
                               unsigned levels) {
    if (flags & (CUDA_ARRAY3D_SPARSE | CUDA_ARRAY3D_DEFERRED_MAPPING)) return 0;
    int layered = (flags & (CUDA_ARRAY3D_LAYERED | CUDA_ARRAY3D_CUBEMAP)) != 0;   /* depth: layers, kept */
    size_t total = 0;
    for (unsigned l = 0; l < (levels ? levels : 1) && l < 64; l++) {
        size_t lw = w >> l, lh = h >> l, ld = layered ? d : d >> l;
        size_t b = shim_level_bytes(lw ? lw : 1, lh ? lh : 1, ld ? ld : 1, format, channels);
        total = b > SIZE_MAX - total ? SIZE_MAX : total + b;
    }
    return total > SIZE_MAX - SHIM_TEXTURE_ALIGN ? SIZE_MAX : (total + SHIM_TEXTURE_ALIGN - 1) & ~(size_t)(SHIM_TEXTURE_ALIGN - 1);
}

/* The common path: `bytes` reserved on the current device (none for 0), the driver's call, the
 * record. */
#define SHIM_ARRAY_CREATE(fn_name, kind, handle, bytes, call)                                  \
    do {                                                                                      \
        int dev_ = (handle) && (bytes) ? shim_current_device() : -1;                          \
        if (shim_take(fn_name, dev_, (bytes)) != 0) return CUDA_ERROR_OUT_OF_MEMORY;          \
        CUresult r_ = (call);                                                                 \
        unsigned long long key_ = r_ == CUDA_SUCCESS && (handle) ? (unsigned long long)(uintptr_t)*(handle) : 0; \
        CUresult s_ = shim_settle(r_, (kind), &key_, (bytes), dev_);                          \
        if (r_ == CUDA_SUCCESS && s_ != CUDA_SUCCESS) *(handle) = NULL;                       \
        return s_;                                                                            \
    } while (0)

SHIM_EXPORT CUresult cuArrayCreate_v2(CUarray *array, const CUDA_ARRAY_DESCRIPTOR *desc) {
    pfn_cuArrayCreate_v2 real = SHIM_REAL(cuArrayCreate_v2);
    if (!real) return CUDA_ERROR_NOT_FOUND;
    size_t bytes = desc ? shim_array_bytes(desc->Width, desc->Height, 1, (unsigned)desc->Format, desc->NumChannels, 0, 1) : 0;
    SHIM_ARRAY_CREATE("cuArrayCreate", SHIM_KIND_ARRAY, array, bytes, real(array, desc));
}

SHIM_EXPORT CUresult cuArrayCreate(CUarray *array, const CUDA_ARRAY_DESCRIPTOR_v1 *desc) {
    pfn_cuArrayCreate real = SHIM_REAL(cuArrayCreate);
    if (!real) return CUDA_ERROR_NOT_FOUND;
    size_t bytes = desc ? shim_array_bytes(desc->Width, desc->Height, 1, (unsigned)desc->Format, desc->NumChannels, 0, 1) : 0;
    SHIM_ARRAY_CREATE("cuArrayCreate", SHIM_KIND_ARRAY, array, bytes, real(array, desc));
}

SHIM_EXPORT CUresult cuArray3DCreate_v2(CUarray *array, const CUDA_ARRAY3D_DESCRIPTOR *desc) {
    pfn_cuArray3DCreate_v2 real = SHIM_REAL(cuArray3DCreate_v2);
    if (!real) return CUDA_ERROR_NOT_FOUND;
    size_t bytes = desc ? shim_array_bytes(desc->Width, desc->Height, desc->Depth, (unsigned)desc->Format,
                                           desc->NumChannels, desc->Flags, 1) : 0;
    SHIM_ARRAY_CREATE("cuArray3DCreate", SHIM_KIND_ARRAY, array, bytes, real(array, desc));
}

SHIM_EXPORT CUresult cuArray3DCreate(CUarray *array, const CUDA_ARRAY3D_DESCRIPTOR_v1 *desc) {
    pfn_cuArray3DCreate real = SHIM_REAL(cuArray3DCreate);
    if (!real) return CUDA_ERROR_NOT_FOUND;
    size_t bytes = desc ? shim_array_bytes(desc->Width, desc->Height, desc->Depth, (unsigned)desc->Format,
                                           desc->NumChannels, desc->Flags, 1) : 0;
    SHIM_ARRAY_CREATE("cuArray3DCreate", SHIM_KIND_ARRAY, array, bytes, real(array, desc));
}

SHIM_EXPORT CUresult cuMipmappedArrayCreate(CUmipmappedArray *array, const CUDA_ARRAY3D_DESCRIPTOR *desc,
                                            unsigned int levels) {
    pfn_cuMipmappedArrayCreate real = SHIM_REAL(cuMipmappedArrayCreate);
    if (!real) return CUDA_ERROR_NOT_FOUND;
    size_t bytes = desc ? shim_array_bytes(desc->Width, desc->Height, desc->Depth, (unsigned)desc->Format,
                                           desc->NumChannels, desc->Flags, levels) : 0;
    SHIM_ARRAY_CREATE("cuMipmappedArrayCreate", SHIM_KIND_MIPMAP, array, bytes, real(array, desc, levels));
}

/* Destroying an array gives back its record's bytes and drops the tiles mapped into it. */
static CUresult shim_array_destroyed(unsigned long long key, CUresult r, int counted, const shim_entry *e) {
    if (counted) shim_freed(r, e);
    if (r == CUDA_SUCCESS) shim_allocs_unpin(key, -1, 0, 0);
    return r;
}

SHIM_EXPORT CUresult cuArrayDestroy(CUarray array) {
    pfn_cuArrayDestroy real = SHIM_REAL(cuArrayDestroy);
    if (!real) return CUDA_ERROR_NOT_FOUND;
    unsigned long long key = (unsigned long long)(uintptr_t)array;
    shim_entry e;
    int counted = array && shim_forget(SHIM_KIND_ARRAY, key, &e);
    return shim_array_destroyed(key, real(array), counted, &e);
}

SHIM_EXPORT CUresult cuMipmappedArrayDestroy(CUmipmappedArray array) {
    pfn_cuMipmappedArrayDestroy real = SHIM_REAL(cuMipmappedArrayDestroy);
    if (!real) return CUDA_ERROR_NOT_FOUND;
    unsigned long long key = (unsigned long long)(uintptr_t)array;
    shim_entry e;
    int counted = array && shim_forget(SHIM_KIND_MIPMAP, key, &e);
    return shim_array_destroyed(key, real(array), counted, &e);
}
