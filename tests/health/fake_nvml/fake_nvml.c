/*
 * A stand-in libnvidia-ml.so.1 for the health tests: the real nvidia-ml-py binding loads
 * it through the library path and calls it as it would call NVIDIA's library.
 *
 * It serves the GPUs described in the file named by $FAKE_NVML_CONFIG, one "key=value"
 * a line; "gpu" on a line of its own starts the next GPU:
 *
 *   driver=550.54.15        (absent file, or "nodriver": nvmlInit fails, no driver)
 *   gpu
 *   name=NVIDIA A100-SXM4-80GB
 *   uuid=GPU-0
 *   memory=85899345920
 *   ecc_volatile=0  ecc_aggregate=0          uncorrectable ECC errors
 *   remap_corr=0 remap_unc=0 remap_pending=0 remap_failed=0
 *   throttle=0                              clocks event reasons bitmask
 *   pcie_gen=4 pcie_gen_max=4 pcie_width=16 pcie_width_max=16
 *   temp=40 temp_slowdown=87 temp_shutdown=92
 *   unsupported=nvmlDeviceGetRemappedRows,...  these answer NVML_ERROR_NOT_SUPPORTED
 *   xid=79                                 an XID event of this GPU (once per event set)
 *
 * The file is read again at every init, device count and event wait, so a test can change
 * what a running process sees.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int nvmlReturn_t;
typedef struct nvmlDevice_st *nvmlDevice_t;
typedef struct fake_event_set *nvmlEventSet_t;

enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_UNINITIALIZED = 1,
    NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_ERROR_DRIVER_NOT_LOADED = 9,
    NVML_ERROR_TIMEOUT = 10,
    NVML_ERROR_INSUFFICIENT_SIZE = 7,
    NVML_ERROR_UNKNOWN = 999,
};

#define MAX_GPUS 16
#define MAX_XIDS 256
#define XID_CRITICAL_EVENT 0x8ULL

struct fake_gpu {
    char name[96];
    char uuid[96];
    unsigned long long memory;
    unsigned long long ecc_volatile, ecc_aggregate;
    unsigned int remap_corr, remap_unc, remap_pending, remap_failed;
    unsigned long long throttle;
    unsigned int pcie_gen, pcie_gen_max, pcie_width, pcie_width_max;
    unsigned int temp, temp_slowdown, temp_shutdown;
    char unsupported[512];
};

struct fake_xid {
    unsigned int gpu;
    unsigned long long xid;
};

static struct fake_gpu gpus[MAX_GPUS];
static unsigned int gpu_count;
static struct fake_xid xids[MAX_XIDS];
static unsigned int xid_count;
static char driver[80];
static int has_driver;
static int initialized;

struct fake_event_set {
    unsigned int delivered;
};

typedef struct {
    unsigned long long total, free, used;
} nvmlMemory_t;

typedef struct {
    nvmlDevice_t device;
    unsigned long long eventType;
    unsigned long long eventData;
    unsigned int gpuInstanceId;
    unsigned int computeInstanceId;
} nvmlEventData_t;

static void load(void) {
    const char *path = getenv("FAKE_NVML_CONFIG");
    FILE *file = path ? fopen(path, "r") : NULL;
    gpu_count = 0;
    xid_count = 0;
    has_driver = 0;
    driver[0] = 0;
    if (!file) return;
    char line[1024];
    struct fake_gpu *gpu = NULL;
    while (fgets(line, sizeof line, file)) {
        line[strcspn(line, "\r\n")] = 0;
        if (strcmp(line, "gpu") == 0) {
            if (gpu_count == MAX_GPUS) break;
            gpu = &gpus[gpu_count++];
            memset(gpu, 0, sizeof *gpu);
            gpu->pcie_gen = gpu->pcie_gen_max = 4;
            gpu->pcie_width = gpu->pcie_width_max = 16;
            gpu->temp = 40;
            gpu->temp_slowdown = 87;
            gpu->temp_shutdown = 92;
            gpu->memory = 85899345920ULL;
            continue;
        }
        char *eq = strchr(line, '=');
        if (!eq) continue;
        *eq = 0;
        const char *key = line, *value = eq + 1;
        unsigned long long number = strtoull(value, NULL, 10);
        if (strcmp(key, "driver") == 0) {
            has_driver = 1;
            snprintf(driver, sizeof driver, "%s", value);
            continue;
        }
        if (!gpu) continue;
        if (strcmp(key, "name") == 0) snprintf(gpu->name, sizeof gpu->name, "%s", value);
        else if (strcmp(key, "uuid") == 0) snprintf(gpu->uuid, sizeof gpu->uuid, "%s", value);
        else if (strcmp(key, "memory") == 0) gpu->memory = number;
        else if (strcmp(key, "ecc_volatile") == 0) gpu->ecc_volatile = number;
        else if (strcmp(key, "ecc_aggregate") == 0) gpu->ecc_aggregate = number;
        else if (strcmp(key, "remap_corr") == 0) gpu->remap_corr = (unsigned) number;
        else if (strcmp(key, "remap_unc") == 0) gpu->remap_unc = (unsigned) number;
        else if (strcmp(key, "remap_pending") == 0) gpu->remap_pending = (unsigned) number;
        else if (strcmp(key, "remap_failed") == 0) gpu->remap_failed = (unsigned) number;
        else if (strcmp(key, "throttle") == 0) gpu->throttle = number;
        else if (strcmp(key, "pcie_gen") == 0) gpu->pcie_gen = (unsigned) number;
        else if (strcmp(key, "pcie_gen_max") == 0) gpu->pcie_gen_max = (unsigned) number;
        else if (strcmp(key, "pcie_width") == 0) gpu->pcie_width = (unsigned) number;
        else if (strcmp(key, "pcie_width_max") == 0) gpu->pcie_width_max = (unsigned) number;
        else if (strcmp(key, "temp") == 0) gpu->temp = (unsigned) number;
        else if (strcmp(key, "temp_slowdown") == 0) gpu->temp_slowdown = (unsigned) number;
        else if (strcmp(key, "temp_shutdown") == 0) gpu->temp_shutdown = (unsigned) number;
        else if (strcmp(key, "unsupported") == 0)
            snprintf(gpu->unsupported, sizeof gpu->unsupported, "%s", value);
        else if (strcmp(key, "xid") == 0 && xid_count < MAX_XIDS) {
            xids[xid_count].gpu = gpu_count - 1;
            xids[xid_count].xid = number;
            xid_count++;
        }
    }
    fclose(file);
}

/* The GPU behind a handle, or NULL; handles are index + 1 so none is NULL. */
static struct fake_gpu *gpu_of(nvmlDevice_t device) {
    uintptr_t index = (uintptr_t) device;
    if (!initialized || index == 0 || index > gpu_count) return NULL;
    return &gpus[index - 1];
}

static int unsupported(struct fake_gpu *gpu, const char *function) {
    return strstr(gpu->unsupported, function) != NULL;
}

#define GPU_OR_FAIL(device, function)                                   \
    struct fake_gpu *gpu = gpu_of(device);                              \
    if (!gpu) return initialized ? NVML_ERROR_INVALID_ARGUMENT : NVML_ERROR_UNINITIALIZED; \
    if (unsupported(gpu, function)) return NVML_ERROR_NOT_SUPPORTED;

nvmlReturn_t nvmlInitWithFlags(unsigned int flags) {
    (void) flags;
    load();
    if (!has_driver) return NVML_ERROR_DRIVER_NOT_LOADED;
    initialized = 1;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlInit_v2(void) { return nvmlInitWithFlags(0); }

nvmlReturn_t nvmlShutdown(void) {
    if (!initialized) return NVML_ERROR_UNINITIALIZED;
    initialized = 0;
    return NVML_SUCCESS;
}

const char *nvmlErrorString(nvmlReturn_t result) {
    switch (result) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case NVML_ERROR_TIMEOUT: return "Timeout";
    default: return "Unknown Error";
    }
}

nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length) {
    if (!initialized) return NVML_ERROR_UNINITIALIZED;
    if (strlen(driver) + 1 > length) return NVML_ERROR_INSUFFICIENT_SIZE;
    strcpy(version, driver);
    return NVML_SUCCESS;
}

/* Counting is where a run starts: read the file again, as a driver reports live state. */
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count) {
    if (!initialized) return NVML_ERROR_UNINITIALIZED;
    load();
    *count = gpu_count;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device) {
    if (!initialized) return NVML_ERROR_UNINITIALIZED;
    if (index >= gpu_count) return NVML_ERROR_INVALID_ARGUMENT;
    *device = (nvmlDevice_t) (uintptr_t) (index + 1);
    return NVML_SUCCESS;
}

static nvmlReturn_t copy_text(char *into, unsigned int length, const char *text) {
    if (strlen(text) + 1 > length) return NVML_ERROR_INSUFFICIENT_SIZE;
    strcpy(into, text);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length) {
    GPU_OR_FAIL(device, "nvmlDeviceGetName");
    return copy_text(name, length, gpu->name);
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length) {
    GPU_OR_FAIL(device, "nvmlDeviceGetUUID");
    return copy_text(uuid, length, gpu->uuid);
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory) {
    GPU_OR_FAIL(device, "nvmlDeviceGetMemoryInfo");
    memory->total = gpu->memory;
    memory->used = 0;
    memory->free = gpu->memory;
    return NVML_SUCCESS;
}

/* errorType 1 = uncorrected; counterType 0 = volatile, 1 = aggregate. */
nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t device, int errorType, int counterType,
                                         unsigned long long *count) {
    GPU_OR_FAIL(device, "nvmlDeviceGetTotalEccErrors");
    if (errorType != 1) *count = 0;
    else *count = counterType == 0 ? gpu->ecc_volatile : gpu->ecc_aggregate;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t device, unsigned int *corrected,
                                       unsigned int *uncorrected, unsigned int *pending,
                                       unsigned int *failed) {
    GPU_OR_FAIL(device, "nvmlDeviceGetRemappedRows");
    *corrected = gpu->remap_corr;
    *uncorrected = gpu->remap_unc;
    *pending = gpu->remap_pending;
    *failed = gpu->remap_failed;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t device,
                                                    unsigned long long *reasons) {
    GPU_OR_FAIL(device, "nvmlDeviceGetCurrentClocksEventReasons");
    *reasons = gpu->throttle;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t device,
                                                       unsigned long long *reasons) {
    GPU_OR_FAIL(device, "nvmlDeviceGetCurrentClocksThrottleReasons");
    *reasons = gpu->throttle;
    return NVML_SUCCESS;
}

#define UINT_GETTER(function, field)                                    \
    nvmlReturn_t function(nvmlDevice_t device, unsigned int *value) {   \
        GPU_OR_FAIL(device, #function);                                 \
        *value = gpu->field;                                            \
        return NVML_SUCCESS;                                            \
    }

UINT_GETTER(nvmlDeviceGetCurrPcieLinkGeneration, pcie_gen)
UINT_GETTER(nvmlDeviceGetMaxPcieLinkGeneration, pcie_gen_max)
UINT_GETTER(nvmlDeviceGetCurrPcieLinkWidth, pcie_width)
UINT_GETTER(nvmlDeviceGetMaxPcieLinkWidth, pcie_width_max)

/* sensor 0 = the GPU die. */
nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, int sensor, unsigned int *temp) {
    GPU_OR_FAIL(device, "nvmlDeviceGetTemperature");
    if (sensor != 0) return NVML_ERROR_INVALID_ARGUMENT;
    *temp = gpu->temp;
    return NVML_SUCCESS;
}

/* threshold 0 = shutdown, 1 = slowdown. */
nvmlReturn_t nvmlDeviceGetTemperatureThreshold(nvmlDevice_t device, int threshold,
                                               unsigned int *temp) {
    GPU_OR_FAIL(device, "nvmlDeviceGetTemperatureThreshold");
    if (threshold == 0) *temp = gpu->temp_shutdown;
    else if (threshold == 1) *temp = gpu->temp_slowdown;
    else return NVML_ERROR_NOT_SUPPORTED;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t *set) {
    if (!initialized) return NVML_ERROR_UNINITIALIZED;
    *set = calloc(1, sizeof(struct fake_event_set));
    return *set ? NVML_SUCCESS : NVML_ERROR_UNKNOWN;
}

nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device, unsigned long long types,
                                      nvmlEventSet_t set) {
    GPU_OR_FAIL(device, "nvmlDeviceRegisterEvents");
    if (!set || !(types & XID_CRITICAL_EVENT)) return NVML_ERROR_INVALID_ARGUMENT;
    return NVML_SUCCESS;
}

/* The next XID this set has not delivered yet; NVML_ERROR_TIMEOUT when there is none. */
nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t *data, unsigned int ms) {
    (void) ms;
    if (!set) return NVML_ERROR_INVALID_ARGUMENT;
    int was = initialized;
    load();
    initialized = was;
    if (set->delivered >= xid_count) return NVML_ERROR_TIMEOUT;
    struct fake_xid *next = &xids[set->delivered++];
    memset(data, 0, sizeof *data);
    data->device = (nvmlDevice_t) (uintptr_t) (next->gpu + 1);
    data->eventType = XID_CRITICAL_EVENT;
    data->eventData = next->xid;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set) {
    free(set);
    return NVML_SUCCESS;
}
