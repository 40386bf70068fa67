/* webgpu.h - the part of the webgpu.h C ABI that pooled uses, written for the Dawn build in
 * npm bun-webgpu-linux-x64@0.1.7 (libwebgpu_wrapper.so, Dawn main of mid-June 2025).
 *
 * That build ships no header, and neither today's webgpu.h nor older ones match it: the
 * instance descriptor embeds WGPUInstanceCapabilities, WGPULimits ends at maxImmediateSize
 * (152 bytes), the queue-work-done callback carries a message. Sizes below are x86-64 SysV
 * and pinned by static asserts against the layout facts in ../shared/docs/webgpu-native.md.
 * Only dawn.c includes this file; the rest of pooled sees device.h. */
#ifndef PL_GPU_WEBGPU_H
#define PL_GPU_WEBGPU_H

#include <stddef.h>
#include <stdint.h>

typedef uint64_t WGPUFlags;
typedef uint32_t WGPUBool;
typedef uint32_t WGPUEnum; /* every enum of this ABI is 32 bits wide */

typedef struct WGPUAdapterImpl *WGPUAdapter;
typedef struct WGPUBindGroupImpl *WGPUBindGroup;
typedef struct WGPUBindGroupLayoutImpl *WGPUBindGroupLayout;
typedef struct WGPUBufferImpl *WGPUBuffer;
typedef struct WGPUCommandBufferImpl *WGPUCommandBuffer;
typedef struct WGPUCommandEncoderImpl *WGPUCommandEncoder;
typedef struct WGPUComputePassEncoderImpl *WGPUComputePassEncoder;
typedef struct WGPUComputePipelineImpl *WGPUComputePipeline;
typedef struct WGPUDeviceImpl *WGPUDevice;
typedef struct WGPUInstanceImpl *WGPUInstance;
typedef struct WGPUPipelineLayoutImpl *WGPUPipelineLayout;
typedef struct WGPUQueueImpl *WGPUQueue;
typedef struct WGPUShaderModuleImpl *WGPUShaderModule;

#define WGPU_STRLEN     SIZE_MAX
#define WGPU_WHOLE_SIZE UINT64_MAX

/* ---- enum values (Dawn's dawn.json of June 2025) ---- */
#define WGPU_STYPE_SHADER_SOURCE_WGSL 0x00000002u
#define WGPU_STYPE_DAWN_TOGGLES       0x0005000Au
/* AdapterPropertiesSubgroupMatrixConfigs: the value Dawn's ValidateAndUnpack<AdapterInfo>
 * accepts in the pinned library (its other chained sTypes there are 0x50008, 0x50013-15) */
#define WGPU_STYPE_SUBGROUP_MATRIX_CONFIGS 0x0005003Bu

#define WGPU_CALLBACK_MODE_WAIT_ANY_ONLY     1u
#define WGPU_CALLBACK_MODE_ALLOW_SPONTANEOUS 3u

#define WGPU_STATUS_SUCCESS  1u
#define WGPU_WAIT_SUCCESS    1u
#define WGPU_WAIT_TIMED_OUT  2u
#define WGPU_REQUEST_SUCCESS 1u /* adapter, device, map, work done, pop error scope */

#define WGPU_ERROR_TYPE_NO_ERROR        1u
#define WGPU_ERROR_FILTER_VALIDATION    1u
#define WGPU_ERROR_FILTER_OUT_OF_MEMORY 2u
#define WGPU_ERROR_FILTER_INTERNAL      3u

#define WGPU_BACKEND_NULL     1u
#define WGPU_BACKEND_VULKAN   6u
#define WGPU_ADAPTER_TYPE_CPU 3u

#define WGPU_FEATURE_SHADER_F16 0x0000000Au
#define WGPU_FEATURE_SUBGROUPS  0x00000011u
/* chromium-experimental-subgroup-matrix: in the pinned library AdapterBase::APIGetInfo
 * answers "Feature ChromiumExperimentalSubgroupMatrix is not available." when this one is
 * missing (later Dawn headers number it 0x50034: the pinned build is older) */
#define WGPU_FEATURE_SUBGROUP_MATRIX 0x00050037u

/* SubgroupMatrixComponentType: the pinned library validates 1..4 only (no i8/u8 yet) and
 * maps Vulkan's FLOAT32, FLOAT16, UINT32, SINT32 cooperative-matrix types to them */
#define WGPU_SMX_F32 1u
#define WGPU_SMX_F16 2u
#define WGPU_SMX_U32 3u
#define WGPU_SMX_I32 4u

#define WGPU_BUFFER_USAGE_MAP_READ 0x1ull
#define WGPU_BUFFER_USAGE_COPY_SRC 0x4ull
#define WGPU_BUFFER_USAGE_COPY_DST 0x8ull
#define WGPU_BUFFER_USAGE_UNIFORM  0x40ull
#define WGPU_BUFFER_USAGE_STORAGE  0x80ull
#define WGPU_MAP_MODE_READ         0x1ull

/* ---- plain structs ---- */
typedef struct WGPUStringView {
    const char *data;
    size_t length; /* WGPU_STRLEN: NUL-terminated */
} WGPUStringView;

typedef struct WGPUChainedStruct {
    struct WGPUChainedStruct *next;
    WGPUEnum sType;
} WGPUChainedStruct;

typedef struct WGPUFuture {
    uint64_t id;
} WGPUFuture;

typedef struct WGPUFutureWaitInfo {
    WGPUFuture future;
    WGPUBool completed;
} WGPUFutureWaitInfo;

typedef struct WGPUInstanceCapabilities {
    WGPUChainedStruct *nextInChain;
    WGPUBool timedWaitAnyEnable;
    size_t timedWaitAnyMaxCount;
} WGPUInstanceCapabilities;

typedef struct WGPUInstanceDescriptor {
    WGPUChainedStruct *nextInChain;
    WGPUInstanceCapabilities capabilities;
} WGPUInstanceDescriptor;

typedef struct WGPUDawnTogglesDescriptor {
    WGPUChainedStruct chain;
    size_t enabledToggleCount;
    const char *const *enabledToggles;
    size_t disabledToggleCount;
    const char *const *disabledToggles;
} WGPUDawnTogglesDescriptor;

typedef struct WGPURequestAdapterOptions {
    WGPUChainedStruct *nextInChain;
    WGPUEnum featureLevel;
    WGPUEnum powerPreference;
    WGPUBool forceFallbackAdapter;
    WGPUEnum backendType;
    void *compatibleSurface;
} WGPURequestAdapterOptions;

typedef struct WGPUAdapterInfo {
    WGPUChainedStruct *nextInChain;
    WGPUStringView vendor, architecture, device, description;
    WGPUEnum backendType;
    WGPUEnum adapterType;
    uint32_t vendorID, deviceID, subgroupMinSize, subgroupMaxSize;
} WGPUAdapterInfo;

typedef struct WGPUSubgroupMatrixConfig {
    WGPUEnum componentType, resultComponentType; /* WGPU_SMX_* */
    uint32_t M, N, K;                            /* (M x K) * (K x N) -> M x N */
} WGPUSubgroupMatrixConfig;

typedef struct WGPUAdapterPropertiesSubgroupMatrixConfigs { /* chained on WGPUAdapterInfo */
    WGPUChainedStruct chain;
    size_t configCount;
    const WGPUSubgroupMatrixConfig *configs;
} WGPUAdapterPropertiesSubgroupMatrixConfigs;

typedef struct WGPULimits {
    WGPUChainedStruct *nextInChain;
    uint32_t maxTextureDimension1D, maxTextureDimension2D, maxTextureDimension3D,
        maxTextureArrayLayers, maxBindGroups, maxBindGroupsPlusVertexBuffers,
        maxBindingsPerBindGroup, maxDynamicUniformBuffersPerPipelineLayout,
        maxDynamicStorageBuffersPerPipelineLayout, maxSampledTexturesPerShaderStage,
        maxSamplersPerShaderStage, maxStorageBuffersPerShaderStage,
        maxStorageTexturesPerShaderStage, maxUniformBuffersPerShaderStage;
    uint64_t maxUniformBufferBindingSize;
    uint64_t maxStorageBufferBindingSize;
    uint32_t minUniformBufferOffsetAlignment, minStorageBufferOffsetAlignment, maxVertexBuffers;
    uint64_t maxBufferSize;
    uint32_t maxVertexAttributes, maxVertexBufferArrayStride, maxInterStageShaderVariables,
        maxColorAttachments, maxColorAttachmentBytesPerSample, maxComputeWorkgroupStorageSize,
        maxComputeInvocationsPerWorkgroup, maxComputeWorkgroupSizeX, maxComputeWorkgroupSizeY,
        maxComputeWorkgroupSizeZ, maxComputeWorkgroupsPerDimension, maxImmediateSize;
} WGPULimits;

/* ---- callbacks: the futures API passes two user pointers ---- */
typedef void (*WGPURequestAdapterCallback)(WGPUEnum status, WGPUAdapter adapter,
                                           WGPUStringView message, void *ud1, void *ud2);
typedef void (*WGPURequestDeviceCallback)(WGPUEnum status, WGPUDevice device,
                                          WGPUStringView message, void *ud1, void *ud2);
typedef void (*WGPUBufferMapCallback)(WGPUEnum status, WGPUStringView message, void *ud1,
                                      void *ud2);
typedef void (*WGPUQueueWorkDoneCallback)(WGPUEnum status, WGPUStringView message, void *ud1,
                                          void *ud2);
typedef void (*WGPUPopErrorScopeCallback)(WGPUEnum status, WGPUEnum type, WGPUStringView message,
                                          void *ud1, void *ud2);
typedef void (*WGPUDeviceLostCallback)(const WGPUDevice *device, WGPUEnum reason,
                                       WGPUStringView message, void *ud1, void *ud2);
typedef void (*WGPUUncapturedErrorCallback)(const WGPUDevice *device, WGPUEnum type,
                                            WGPUStringView message, void *ud1, void *ud2);

typedef struct WGPURequestAdapterCallbackInfo {
    WGPUChainedStruct *nextInChain;
    WGPUEnum mode;
    WGPURequestAdapterCallback callback;
    void *userdata1, *userdata2;
} WGPURequestAdapterCallbackInfo;
typedef struct WGPURequestDeviceCallbackInfo {
    WGPUChainedStruct *nextInChain;
    WGPUEnum mode;
    WGPURequestDeviceCallback callback;
    void *userdata1, *userdata2;
} WGPURequestDeviceCallbackInfo;
typedef struct WGPUBufferMapCallbackInfo {
    WGPUChainedStruct *nextInChain;
    WGPUEnum mode;
    WGPUBufferMapCallback callback;
    void *userdata1, *userdata2;
} WGPUBufferMapCallbackInfo;
typedef struct WGPUQueueWorkDoneCallbackInfo {
    WGPUChainedStruct *nextInChain;
    WGPUEnum mode;
    WGPUQueueWorkDoneCallback callback;
    void *userdata1, *userdata2;
} WGPUQueueWorkDoneCallbackInfo;
typedef struct WGPUPopErrorScopeCallbackInfo {
    WGPUChainedStruct *nextInChain;
    WGPUEnum mode;
    WGPUPopErrorScopeCallback callback;
    void *userdata1, *userdata2;
} WGPUPopErrorScopeCallbackInfo;
typedef struct WGPUDeviceLostCallbackInfo {
    WGPUChainedStruct *nextInChain;
    WGPUEnum mode;
    WGPUDeviceLostCallback callback;
    void *userdata1, *userdata2;
} WGPUDeviceLostCallbackInfo;
typedef struct WGPUUncapturedErrorCallbackInfo { /* no mode: it always fires at once */
    WGPUChainedStruct *nextInChain;
    WGPUUncapturedErrorCallback callback;
    void *userdata1, *userdata2;
} WGPUUncapturedErrorCallbackInfo;

/* ---- descriptors ---- */
typedef struct WGPUQueueDescriptor {
    WGPUChainedStruct *nextInChain;
    WGPUStringView label;
} WGPUQueueDescriptor;

typedef struct WGPUDeviceDescriptor {
    WGPUChainedStruct *nextInChain;
    WGPUStringView label;
    size_t requiredFeatureCount;
    const WGPUEnum *requiredFeatures;
    const WGPULimits *requiredLimits;
    WGPUQueueDescriptor defaultQueue;
    WGPUDeviceLostCallbackInfo deviceLostCallbackInfo;
    WGPUUncapturedErrorCallbackInfo uncapturedErrorCallbackInfo;
} WGPUDeviceDescriptor;

typedef struct WGPUBufferDescriptor {
    WGPUChainedStruct *nextInChain;
    WGPUStringView label;
    WGPUFlags usage;
    uint64_t size;
    WGPUBool mappedAtCreation;
} WGPUBufferDescriptor;

typedef struct WGPUShaderModuleDescriptor {
    WGPUChainedStruct *nextInChain;
    WGPUStringView label;
} WGPUShaderModuleDescriptor;

typedef struct WGPUShaderSourceWGSL {
    WGPUChainedStruct chain;
    WGPUStringView code;
} WGPUShaderSourceWGSL;

typedef struct WGPUComputeState {
    WGPUChainedStruct *nextInChain;
    WGPUShaderModule module;
    WGPUStringView entryPoint;
    size_t constantCount;
    const void *constants;
} WGPUComputeState;

typedef struct WGPUComputePipelineDescriptor {
    WGPUChainedStruct *nextInChain;
    WGPUStringView label;
    WGPUPipelineLayout layout; /* NULL: layout derived from the shader */
    WGPUComputeState compute;
} WGPUComputePipelineDescriptor;

typedef struct WGPUBindGroupEntry {
    WGPUChainedStruct *nextInChain;
    uint32_t binding;
    WGPUBuffer buffer;
    uint64_t offset;
    uint64_t size;
    void *sampler;
    void *textureView;
} WGPUBindGroupEntry;

typedef struct WGPUBindGroupDescriptor {
    WGPUChainedStruct *nextInChain;
    WGPUStringView label;
    WGPUBindGroupLayout layout;
    size_t entryCount;
    const WGPUBindGroupEntry *entries;
} WGPUBindGroupDescriptor;

/* The layouts of the 64-bit Dawn build dawn.c loads; a 32-bit build (wasm32) loads none. */
#if UINTPTR_MAX > 0xffffffffu
_Static_assert(sizeof(WGPUStringView) == 16, "WGPUStringView layout");
_Static_assert(sizeof(WGPUInstanceDescriptor) == 32, "WGPUInstanceDescriptor layout");
_Static_assert(sizeof(WGPURequestAdapterOptions) == 32, "WGPURequestAdapterOptions layout");
_Static_assert(sizeof(WGPUAdapterInfo) == 96, "WGPUAdapterInfo layout");
_Static_assert(sizeof(WGPUSubgroupMatrixConfig) == 20, "WGPUSubgroupMatrixConfig layout");
_Static_assert(sizeof(WGPUAdapterPropertiesSubgroupMatrixConfigs) == 32, "smx configs layout");
_Static_assert(sizeof(WGPULimits) == 152, "WGPULimits layout");
_Static_assert(sizeof(WGPURequestAdapterCallbackInfo) == 40, "callback info layout");
_Static_assert(sizeof(WGPUUncapturedErrorCallbackInfo) == 32, "uncaptured info layout");
_Static_assert(sizeof(WGPUDeviceDescriptor) == 144, "WGPUDeviceDescriptor layout");
_Static_assert(sizeof(WGPUBufferDescriptor) == 48, "WGPUBufferDescriptor layout");
_Static_assert(sizeof(WGPUComputePipelineDescriptor) == 80, "pipeline descriptor layout");
_Static_assert(sizeof(WGPUBindGroupEntry) == 56, "WGPUBindGroupEntry layout");
_Static_assert(sizeof(WGPUFutureWaitInfo) == 16, "WGPUFutureWaitInfo layout");
#endif

/* The functions dawn.c resolves with dlsym: name, return type, arguments. One list keeps the
 * pointer declarations and the lookup loop from drifting apart. */
#define PL_WGPU_PROCS(X)                                                                           \
    X(wgpuCreateInstance, WGPUInstance, (const WGPUInstanceDescriptor *))                          \
    X(wgpuInstanceRelease, void, (WGPUInstance))                                                   \
    X(wgpuInstanceRequestAdapter, WGPUFuture,                                                      \
      (WGPUInstance, const WGPURequestAdapterOptions *, WGPURequestAdapterCallbackInfo))           \
    X(wgpuInstanceWaitAny, WGPUEnum, (WGPUInstance, size_t, WGPUFutureWaitInfo *, uint64_t))       \
    X(wgpuInstanceProcessEvents, void, (WGPUInstance))                                             \
    X(wgpuAdapterGetInfo, WGPUEnum, (WGPUAdapter, WGPUAdapterInfo *))                              \
    X(wgpuAdapterInfoFreeMembers, void, (WGPUAdapterInfo))                                         \
    X(wgpuAdapterGetLimits, WGPUEnum, (WGPUAdapter, WGPULimits *))                                 \
    X(wgpuAdapterPropertiesSubgroupMatrixConfigsFreeMembers, void,                                 \
      (WGPUAdapterPropertiesSubgroupMatrixConfigs))                                                \
    X(wgpuAdapterHasFeature, WGPUBool, (WGPUAdapter, WGPUEnum))                                    \
    X(wgpuAdapterRequestDevice, WGPUFuture,                                                        \
      (WGPUAdapter, const WGPUDeviceDescriptor *, WGPURequestDeviceCallbackInfo))                  \
    X(wgpuAdapterRelease, void, (WGPUAdapter))                                                     \
    X(wgpuDeviceGetLimits, WGPUEnum, (WGPUDevice, WGPULimits *))                                   \
    X(wgpuDeviceHasFeature, WGPUBool, (WGPUDevice, WGPUEnum))                                      \
    X(wgpuDeviceGetQueue, WGPUQueue, (WGPUDevice))                                                 \
    X(wgpuDeviceCreateBuffer, WGPUBuffer, (WGPUDevice, const WGPUBufferDescriptor *))              \
    X(wgpuDeviceCreateShaderModule, WGPUShaderModule,                                              \
      (WGPUDevice, const WGPUShaderModuleDescriptor *))                                            \
    X(wgpuShaderModuleRelease, void, (WGPUShaderModule))                                           \
    X(wgpuDeviceCreateComputePipeline, WGPUComputePipeline,                                        \
      (WGPUDevice, const WGPUComputePipelineDescriptor *))                                         \
    X(wgpuComputePipelineGetBindGroupLayout, WGPUBindGroupLayout, (WGPUComputePipeline, uint32_t)) \
    X(wgpuComputePipelineRelease, void, (WGPUComputePipeline))                                     \
    X(wgpuBindGroupLayoutRelease, void, (WGPUBindGroupLayout))                                     \
    X(wgpuDeviceCreateBindGroup, WGPUBindGroup, (WGPUDevice, const WGPUBindGroupDescriptor *))     \
    X(wgpuBindGroupRelease, void, (WGPUBindGroup))                                                 \
    X(wgpuDeviceCreateCommandEncoder, WGPUCommandEncoder, (WGPUDevice, const void *))              \
    X(wgpuCommandEncoderBeginComputePass, WGPUComputePassEncoder,                                  \
      (WGPUCommandEncoder, const void *))                                                          \
    X(wgpuComputePassEncoderSetPipeline, void, (WGPUComputePassEncoder, WGPUComputePipeline))      \
    X(wgpuComputePassEncoderSetBindGroup, void,                                                    \
      (WGPUComputePassEncoder, uint32_t, WGPUBindGroup, size_t, const uint32_t *))                 \
    X(wgpuComputePassEncoderDispatchWorkgroups, void,                                              \
      (WGPUComputePassEncoder, uint32_t, uint32_t, uint32_t))                                      \
    X(wgpuComputePassEncoderEnd, void, (WGPUComputePassEncoder))                                   \
    X(wgpuComputePassEncoderRelease, void, (WGPUComputePassEncoder))                               \
    X(wgpuCommandEncoderCopyBufferToBuffer, void,                                                  \
      (WGPUCommandEncoder, WGPUBuffer, uint64_t, WGPUBuffer, uint64_t, uint64_t))                  \
    X(wgpuCommandEncoderFinish, WGPUCommandBuffer, (WGPUCommandEncoder, const void *))             \
    X(wgpuCommandEncoderRelease, void, (WGPUCommandEncoder))                                       \
    X(wgpuCommandBufferRelease, void, (WGPUCommandBuffer))                                         \
    X(wgpuQueueSubmit, void, (WGPUQueue, size_t, const WGPUCommandBuffer *))                       \
    X(wgpuQueueWriteBuffer, void, (WGPUQueue, WGPUBuffer, uint64_t, const void *, size_t))         \
    X(wgpuQueueOnSubmittedWorkDone, WGPUFuture, (WGPUQueue, WGPUQueueWorkDoneCallbackInfo))        \
    X(wgpuQueueRelease, void, (WGPUQueue))                                                         \
    X(wgpuBufferMapAsync, WGPUFuture,                                                              \
      (WGPUBuffer, WGPUFlags, size_t, size_t, WGPUBufferMapCallbackInfo))                          \
    X(wgpuBufferGetConstMappedRange, const void *, (WGPUBuffer, size_t, size_t))                   \
    X(wgpuBufferUnmap, void, (WGPUBuffer))                                                         \
    X(wgpuBufferDestroy, void, (WGPUBuffer))                                                       \
    X(wgpuBufferRelease, void, (WGPUBuffer))                                                       \
    X(wgpuDevicePushErrorScope, void, (WGPUDevice, WGPUEnum))                                      \
    X(wgpuDevicePopErrorScope, WGPUFuture, (WGPUDevice, WGPUPopErrorScopeCallbackInfo))            \
    X(wgpuDeviceDestroy, void, (WGPUDevice))                                                       \
    X(wgpuDeviceRelease, void, (WGPUDevice))

#endif
