/*
 * VMTI: minivm's tool interface, the C API for native agents.
 *
 * Shaped after JVMTI: an agent is a shared library exporting Agent_OnLoad;
 * it asks the VM for an environment (vmtiEnv), adds capabilities, registers
 * event callbacks and enables events. Its first purpose is low-overhead heap
 * sampling (JEP 331's SampledObjectAlloc) with OCaml statmemprof's lifecycle
 * events (ObjectPromote, ObjectFree). Reference: docs/agent-api.md.
 *
 * This header is self-contained C99, usable from C and C++.
 *
 * ABI rules:
 *  - The function table only grows at its end; slot numbers never change.
 *  - vmtiEventCallbacks only grows at its end; SetEventCallbacks takes the
 *    size of the agent's struct, so an agent built against an older header
 *    keeps working.
 *  - Error codes and event numbers follow JVMTI's where JVMTI has them.
 */
#ifndef VMTI_VMTI_H_
#define VMTI_VMTI_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
#define VMTI_EXPORT extern "C" __attribute__((visibility("default")))
extern "C" {
#else
#define VMTI_EXPORT __attribute__((visibility("default")))
#endif

/* ---- Versions -------------------------------------------------------- */

#define VMTI_VERSION_1 0x70010000
#define VMTI_VERSION_1_0 0x70010000
#define VMTI_VERSION VMTI_VERSION_1_0

/* ---- Basic types ------------------------------------------------------ */

typedef int32_t vmtiInt;
typedef int64_t vmtiLong;
typedef uint8_t vmtiBool;
typedef int64_t vmtiLocation; /* a bytecode offset within a method */

typedef struct _vmtiObject* vmtiObject; /* valid only during the callback or
                                           call that produced it */
typedef struct _vmtiWeak* vmtiWeak;     /* a weak reference; see NewWeakRef */
typedef struct _vmtiThread* vmtiThread; /* valid while the thread lives */
typedef struct _vmtiClass* vmtiClass;   /* valid for the VM's lifetime */
typedef struct _vmtiMethodID* vmtiMethodID; /* valid for the VM's lifetime */
typedef struct _vmtiRawMonitor* vmtiRawMonitorID; /* valid until DestroyRawMonitor */

/* ---- Errors ----------------------------------------------------------- */

/* X(name, value): the one table of error codes. GetErrorName returns
 * "VMTI_ERROR_<name>". */
#define VMTI_ERRORS(X)                   \
  X(NONE, 0)                             \
  X(INVALID_THREAD, 10)                  \
  X(THREAD_NOT_ALIVE, 15)                \
  X(INVALID_OBJECT, 20)                  \
  X(INVALID_CLASS, 21)                   \
  X(INVALID_METHODID, 23)                \
  X(INVALID_LOCATION, 24)                \
  X(INVALID_MONITOR, 50)                 \
  X(NOT_MONITOR_OWNER, 51)               \
  X(INTERRUPT, 52)                       \
  X(UNSUPPORTED_VERSION, 68)             \
  X(NOT_AVAILABLE, 98)                   \
  X(MUST_POSSESS_CAPABILITY, 99)         \
  X(NULL_POINTER, 100)                   \
  X(ABSENT_INFORMATION, 101)             \
  X(INVALID_EVENT_TYPE, 102)             \
  X(ILLEGAL_ARGUMENT, 103)               \
  X(OUT_OF_MEMORY, 110)                  \
  X(WRONG_PHASE, 112)                    \
  X(INTERNAL, 113)                       \
  X(INVALID_ENVIRONMENT, 116)

typedef enum {
#define VMTI_ERROR_ENUM_(name, value) VMTI_ERROR_##name = value,
  VMTI_ERRORS(VMTI_ERROR_ENUM_)
#undef VMTI_ERROR_ENUM_
  VMTI_ERROR_MAX = 116
} vmtiError;

/* ---- Phases, modes, events, generations ------------------------------ */

typedef enum {
  VMTI_PHASE_ONLOAD = 1, /* inside Agent_OnLoad */
  VMTI_PHASE_LIVE = 4,   /* from VMInit until VM death */
  VMTI_PHASE_DEAD = 8    /* after VMDeath */
} vmtiPhase;

typedef enum { VMTI_DISABLE = 0, VMTI_ENABLE = 1 } vmtiEventMode;

typedef enum {
  VMTI_MIN_EVENT_TYPE_VAL = 50,
  VMTI_EVENT_VM_INIT = 50,
  VMTI_EVENT_VM_DEATH = 51,
  VMTI_EVENT_THREAD_START = 52,
  VMTI_EVENT_THREAD_END = 53,
  VMTI_EVENT_GARBAGE_COLLECTION_START = 81,
  VMTI_EVENT_GARBAGE_COLLECTION_FINISH = 82,
  VMTI_EVENT_OBJECT_FREE = 83,
  VMTI_EVENT_SAMPLED_OBJECT_ALLOC = 86,
  VMTI_EVENT_OBJECT_PROMOTE = 87,
  VMTI_MAX_EVENT_TYPE_VAL = 87
} vmtiEvent;

typedef enum {
  VMTI_GENERATION_YOUNG = 1,
  VMTI_GENERATION_OLD = 2
} vmtiGeneration;

/* ---- Structs ---------------------------------------------------------- */

typedef struct {
  char* name; /* Allocate'd: free with Deallocate */
  vmtiLong id; /* 0 for main, n for thread-n */
} vmtiThreadInfo;

typedef struct {
  vmtiMethodID method;
  vmtiLocation location;
} vmtiFrameInfo;

/* One thread's stack, from GetAllStackTraces / GetThreadListStackTraces. */
typedef struct {
  vmtiThread thread;
  vmtiInt state;               /* 0 (minivm reports no thread states) */
  vmtiFrameInfo* frame_buffer; /* frame_count frames, innermost first */
  vmtiInt frame_count;
} vmtiStackInfo;

typedef struct {
  vmtiLong sample_count;     /* sample points inside the object, >= 1 */
  vmtiInt interval;          /* mean interval in force when they were drawn */
  vmtiGeneration generation; /* where the object was allocated */
  double weight;             /* Horvitz-Thompson bytes: size / (1 - exp(-size/interval)),
                                size itself at interval 0 */
} vmtiSampleInfo;

typedef struct {
  unsigned int can_generate_sampled_alloc_events : 1;
  unsigned int can_tag_objects : 1;
  unsigned int can_generate_object_free_events : 1;
  unsigned int can_generate_object_promote_events : 1;
  unsigned int can_generate_garbage_collection_events : 1;
  unsigned int : 27;
  unsigned int reserved[3]; /* room to grow; must be zero */
} vmtiCapabilities;

/* ---- Heap walking (FollowReferences, IterateThroughHeap) -------------- */

/* What refers to an object, in heap_reference_callback (JVMTI's numbers). */
typedef enum {
  VMTI_HEAP_REFERENCE_FIELD = 2,          /* index = field index */
  VMTI_HEAP_REFERENCE_ARRAY_ELEMENT = 3,  /* index = element index */
  VMTI_HEAP_REFERENCE_GLOBAL = 21,        /* index = global variable index */
  VMTI_HEAP_REFERENCE_STACK_LOCAL = 25,   /* stack_local filled in */
  VMTI_HEAP_REFERENCE_OTHER = 27          /* any other root the VM holds */
} vmtiHeapReferenceKind;

typedef struct {
  vmtiThread thread;     /* the thread whose stack holds the reference */
  vmtiInt depth;         /* frame depth, 0 = innermost */
  vmtiMethodID method;   /* the frame's method */
  vmtiLocation location; /* the frame's current bytecode offset */
  vmtiInt slot;          /* frame slot: parameters and locals first (see
                            GetLocalName), then the operand stack */
} vmtiHeapReferenceInfoStackLocal;

typedef union {
  struct { vmtiInt index; } field;
  struct { vmtiInt index; } array;
  struct { vmtiInt index; } global;
  vmtiHeapReferenceInfoStackLocal stack_local;
} vmtiHeapReferenceInfo;

/* IterateThroughHeap: one call per live object. */
typedef vmtiInt (*vmtiHeapIterationCallback)(vmtiClass klass, vmtiLong size,
    vmtiLong* tag_ptr, vmtiInt length, void* user_data);
/* FollowReferences: one call per reference. referrer_klass and
 * referrer_tag_ptr are NULL for roots. Writing *tag_ptr (or
 * *referrer_tag_ptr) sets the tag; 0 removes it. */
typedef vmtiInt (*vmtiHeapReferenceCallback)(vmtiHeapReferenceKind reference_kind,
    const vmtiHeapReferenceInfo* reference_info, vmtiClass klass,
    vmtiClass referrer_klass, vmtiLong size, vmtiLong* tag_ptr,
    vmtiLong* referrer_tag_ptr, vmtiInt length, void* user_data);

typedef struct {
  vmtiHeapIterationCallback heap_iteration_callback;
  vmtiHeapReferenceCallback heap_reference_callback;
} vmtiHeapCallbacks;

/* Callback return bits. */
#define VMTI_VISIT_OBJECTS 0x100 /* follow the referee's references */
#define VMTI_VISIT_ABORT 0x8000  /* stop the walk */
/* heap_filter bits: leave out tagged, or untagged, objects. */
#define VMTI_HEAP_FILTER_TAGGED 0x4
#define VMTI_HEAP_FILTER_UNTAGGED 0x8

/* ---- Environments ----------------------------------------------------- */

struct vmtiInterface_1_;
struct vmtiVMInterface_;
#ifdef __cplusplus
struct _vmtiEnv;
struct _vmtiVM;
typedef _vmtiEnv vmtiEnv;
typedef _vmtiVM vmtiVM;
#else
typedef const struct vmtiInterface_1_* vmtiEnv;
typedef const struct vmtiVMInterface_* vmtiVM;
#endif

/* ---- Event callbacks ---------------------------------------------------- */

typedef void (*vmtiEventVMInit)(vmtiEnv* env, vmtiThread thread);
typedef void (*vmtiEventVMDeath)(vmtiEnv* env);
typedef void (*vmtiEventThreadStart)(vmtiEnv* env, vmtiThread thread);
typedef void (*vmtiEventThreadEnd)(vmtiEnv* env, vmtiThread thread);
typedef void (*vmtiEventSampledObjectAlloc)(vmtiEnv* env, vmtiThread thread,
                                            vmtiObject object, vmtiClass klass,
                                            vmtiLong size);
typedef void (*vmtiEventGarbageCollectionStart)(vmtiEnv* env);
typedef void (*vmtiEventGarbageCollectionFinish)(vmtiEnv* env);
typedef void (*vmtiEventObjectFree)(vmtiEnv* env, vmtiLong tag);
typedef void (*vmtiEventObjectPromote)(vmtiEnv* env, vmtiLong tag);

/* Append-only. Pass sizeof(vmtiEventCallbacks) to SetEventCallbacks. */
typedef struct {
  vmtiEventVMInit VMInit;
  vmtiEventVMDeath VMDeath;
  vmtiEventThreadStart ThreadStart;
  vmtiEventThreadEnd ThreadEnd;
  vmtiEventSampledObjectAlloc SampledObjectAlloc;
  vmtiEventGarbageCollectionStart GarbageCollectionStart;
  vmtiEventGarbageCollectionFinish GarbageCollectionFinish;
  vmtiEventObjectFree ObjectFree;
  vmtiEventObjectPromote ObjectPromote;
} vmtiEventCallbacks;

/* An agent thread's function (RunAgentThread): runs on the new thread with
 * the environment that started it and the agent's argument. */
typedef void (*vmtiStartFunction)(vmtiEnv* env, void* arg);

/* ---- The function table (slot numbers are part of the ABI) ------------ */

typedef struct vmtiInterface_1_ {
  /*  1 */ vmtiError (*GetVersionNumber)(vmtiEnv* env, vmtiInt* version_ptr);
  /*  2 */ vmtiError (*GetPhase)(vmtiEnv* env, vmtiPhase* phase_ptr);
  /*  3 */ vmtiError (*GetErrorName)(vmtiEnv* env, vmtiError error, char** name_ptr);
  /*  4 */ vmtiError (*Allocate)(vmtiEnv* env, vmtiLong size, unsigned char** mem_ptr);
  /*  5 */ vmtiError (*Deallocate)(vmtiEnv* env, unsigned char* mem);
  /*  6 */ vmtiError (*DisposeEnvironment)(vmtiEnv* env);
  /*  7 */ vmtiError (*SetEnvironmentLocalStorage)(vmtiEnv* env, const void* data);
  /*  8 */ vmtiError (*GetEnvironmentLocalStorage)(vmtiEnv* env, void** data_ptr);
  /*  9 */ vmtiError (*GetPotentialCapabilities)(vmtiEnv* env, vmtiCapabilities* caps_ptr);
  /* 10 */ vmtiError (*AddCapabilities)(vmtiEnv* env, const vmtiCapabilities* caps_ptr);
  /* 11 */ vmtiError (*RelinquishCapabilities)(vmtiEnv* env, const vmtiCapabilities* caps_ptr);
  /* 12 */ vmtiError (*GetCapabilities)(vmtiEnv* env, vmtiCapabilities* caps_ptr);
  /* 13 */ vmtiError (*SetEventCallbacks)(vmtiEnv* env, const vmtiEventCallbacks* callbacks,
                                          vmtiInt size_of_callbacks);
  /* 14 */ vmtiError (*SetEventNotificationMode)(vmtiEnv* env, vmtiEventMode mode,
                                                 vmtiEvent event_type, vmtiThread event_thread);
  /* 15 */ vmtiError (*SetHeapSamplingInterval)(vmtiEnv* env, vmtiInt sampling_interval);
  /* 16 */ vmtiError (*GetHeapSamplingInterval)(vmtiEnv* env, vmtiInt* interval_ptr);
  /* 17 */ vmtiError (*GetCurrentThread)(vmtiEnv* env, vmtiThread* thread_ptr);
  /* 18 */ vmtiError (*GetThreadInfo)(vmtiEnv* env, vmtiThread thread, vmtiThreadInfo* info_ptr);
  /* 19 */ vmtiError (*GetAllThreads)(vmtiEnv* env, vmtiInt* threads_count_ptr,
                                      vmtiThread** threads_ptr);
  /* 20 */ vmtiError (*GetStackTrace)(vmtiEnv* env, vmtiThread thread, vmtiInt start_depth,
                                      vmtiInt max_frame_count, vmtiFrameInfo* frame_buffer,
                                      vmtiInt* count_ptr);
  /* 21 */ vmtiError (*GetMethodName)(vmtiEnv* env, vmtiMethodID method, char** name_ptr,
                                      char** signature_ptr, char** generic_ptr);
  /* 22 */ vmtiError (*GetLineNumber)(vmtiEnv* env, vmtiMethodID method, vmtiLocation location,
                                      vmtiInt* line_ptr);
  /* 23 */ vmtiError (*GetMethodSourceFile)(vmtiEnv* env, vmtiMethodID method,
                                            char** source_name_ptr);
  /* 24 */ vmtiError (*GetObjectClass)(vmtiEnv* env, vmtiObject object, vmtiClass* klass_ptr);
  /* 25 */ vmtiError (*GetClassSignature)(vmtiEnv* env, vmtiClass klass, char** signature_ptr,
                                          char** generic_ptr);
  /* 26 */ vmtiError (*GetObjectSize)(vmtiEnv* env, vmtiObject object, vmtiLong* size_ptr);
  /* 27 */ vmtiError (*GetTag)(vmtiEnv* env, vmtiObject object, vmtiLong* tag_ptr);
  /* 28 */ vmtiError (*SetTag)(vmtiEnv* env, vmtiObject object, vmtiLong tag);
  /* 29 */ vmtiError (*NewWeakRef)(vmtiEnv* env, vmtiObject object, vmtiWeak* weak_ptr);
  /* 30 */ vmtiError (*IsWeakRefCleared)(vmtiEnv* env, vmtiWeak weak, vmtiBool* cleared_ptr);
  /* 31 */ vmtiError (*DeleteWeakRef)(vmtiEnv* env, vmtiWeak weak);
  /* 32 */ vmtiError (*GetObjectGeneration)(vmtiEnv* env, vmtiObject object,
                                            vmtiGeneration* generation_ptr);
  /* 33 */ vmtiError (*GetSampleInfo)(vmtiEnv* env, vmtiSampleInfo* info_ptr);
  /* 34 */ vmtiError (*ForceGarbageCollection)(vmtiEnv* env);
  /* 35 */ vmtiError (*GetTime)(vmtiEnv* env, vmtiLong* nanos_ptr);
  /* ---- Second edition (the contract's "Additions"; docs/agent-api.md) ---- */
  /* 36 */ vmtiError (*SetHeapSamplingRate)(vmtiEnv* env, vmtiInt bytes);
  /* 37 */ vmtiError (*GetThreadParent)(vmtiEnv* env, vmtiThread thread, vmtiThread* parent_ptr);
  /* 38 */ vmtiError (*GetFrameCount)(vmtiEnv* env, vmtiThread thread, vmtiInt* count_ptr);
  /* 39 */ vmtiError (*GetAllStackTraces)(vmtiEnv* env, vmtiInt max_frame_count,
                                          vmtiStackInfo** stack_info_ptr,
                                          vmtiInt* thread_count_ptr);
  /* 40 */ vmtiError (*GetThreadListStackTraces)(vmtiEnv* env, vmtiInt thread_count,
                                                 const vmtiThread* thread_list,
                                                 vmtiInt max_frame_count,
                                                 vmtiStackInfo** stack_info_ptr);
  /* Agent threads and raw monitors: JVMTI's, with a name instead of a jthread.
   * Raw monitor functions work in every phase and in GC callbacks. */
  /* 41 */ vmtiError (*RunAgentThread)(vmtiEnv* env, const char* name, vmtiStartFunction proc,
                                       const void* arg, vmtiThread* thread_ptr);
  /* 42 */ vmtiError (*CreateRawMonitor)(vmtiEnv* env, const char* name,
                                         vmtiRawMonitorID* monitor_ptr);
  /* 43 */ vmtiError (*DestroyRawMonitor)(vmtiEnv* env, vmtiRawMonitorID monitor);
  /* 44 */ vmtiError (*RawMonitorEnter)(vmtiEnv* env, vmtiRawMonitorID monitor);
  /* 45 */ vmtiError (*RawMonitorExit)(vmtiEnv* env, vmtiRawMonitorID monitor);
  /* 46 */ vmtiError (*RawMonitorWait)(vmtiEnv* env, vmtiRawMonitorID monitor, vmtiLong millis);
  /* 47 */ vmtiError (*RawMonitorNotify)(vmtiEnv* env, vmtiRawMonitorID monitor);
  /* 48 */ vmtiError (*RawMonitorNotifyAll)(vmtiEnv* env, vmtiRawMonitorID monitor);
  /* ---- Heap walking (capability can_tag_objects, LIVE phase) ---- */
  /* 49 */ vmtiError (*FollowReferences)(vmtiEnv* env, vmtiInt heap_filter, vmtiClass klass,
                                         vmtiObject initial_object,
                                         const vmtiHeapCallbacks* callbacks,
                                         const void* user_data);
  /* 50 */ vmtiError (*IterateThroughHeap)(vmtiEnv* env, vmtiInt heap_filter, vmtiClass klass,
                                           const vmtiHeapCallbacks* callbacks,
                                           const void* user_data);
  /* 51 */ vmtiError (*GetObjectsWithTags)(vmtiEnv* env, vmtiInt tag_count, const vmtiLong* tags,
                                           vmtiInt* count_ptr, vmtiObject** object_result_ptr,
                                           vmtiLong** tag_result_ptr);
  /* 52 */ vmtiError (*GetFieldName)(vmtiEnv* env, vmtiClass klass, vmtiInt index,
                                     char** name_ptr);
  /* 53 */ vmtiError (*GetGlobalName)(vmtiEnv* env, vmtiInt index, char** name_ptr);
  /* 54 */ vmtiError (*GetLocalName)(vmtiEnv* env, vmtiMethodID method, vmtiInt slot,
                                     char** name_ptr);
} vmtiInterface_1;

typedef struct vmtiVMInterface_ {
  void* reserved0;
  void* reserved1;
  void* reserved2;
  /* Makes a new, independent environment on each call. */
  vmtiError (*GetEnv)(vmtiVM* vm, void** penv, vmtiInt version);
} vmtiVMInterface;

#ifdef __cplusplus
} /* extern "C" */

/* C++: `(*env)->Fn(env, ...)` works as in C, and `env->Fn(...)` too. */
struct _vmtiEnv {
  const struct vmtiInterface_1_* functions;
  const struct vmtiInterface_1_* operator->() const { return functions; }

  vmtiError GetVersionNumber(vmtiInt* v) { return functions->GetVersionNumber(this, v); }
  vmtiError GetPhase(vmtiPhase* p) { return functions->GetPhase(this, p); }
  vmtiError GetErrorName(vmtiError e, char** n) { return functions->GetErrorName(this, e, n); }
  vmtiError Allocate(vmtiLong s, unsigned char** m) { return functions->Allocate(this, s, m); }
  vmtiError Deallocate(unsigned char* m) { return functions->Deallocate(this, m); }
  vmtiError DisposeEnvironment() { return functions->DisposeEnvironment(this); }
  vmtiError SetEnvironmentLocalStorage(const void* d) {
    return functions->SetEnvironmentLocalStorage(this, d);
  }
  vmtiError GetEnvironmentLocalStorage(void** d) {
    return functions->GetEnvironmentLocalStorage(this, d);
  }
  vmtiError GetPotentialCapabilities(vmtiCapabilities* c) {
    return functions->GetPotentialCapabilities(this, c);
  }
  vmtiError AddCapabilities(const vmtiCapabilities* c) {
    return functions->AddCapabilities(this, c);
  }
  vmtiError RelinquishCapabilities(const vmtiCapabilities* c) {
    return functions->RelinquishCapabilities(this, c);
  }
  vmtiError GetCapabilities(vmtiCapabilities* c) { return functions->GetCapabilities(this, c); }
  vmtiError SetEventCallbacks(const vmtiEventCallbacks* cb, vmtiInt size) {
    return functions->SetEventCallbacks(this, cb, size);
  }
  vmtiError SetEventNotificationMode(vmtiEventMode m, vmtiEvent e, vmtiThread t) {
    return functions->SetEventNotificationMode(this, m, e, t);
  }
  vmtiError SetHeapSamplingInterval(vmtiInt i) {
    return functions->SetHeapSamplingInterval(this, i);
  }
  vmtiError GetHeapSamplingInterval(vmtiInt* i) {
    return functions->GetHeapSamplingInterval(this, i);
  }
  vmtiError GetCurrentThread(vmtiThread* t) { return functions->GetCurrentThread(this, t); }
  vmtiError GetThreadInfo(vmtiThread t, vmtiThreadInfo* i) {
    return functions->GetThreadInfo(this, t, i);
  }
  vmtiError GetAllThreads(vmtiInt* n, vmtiThread** ts) {
    return functions->GetAllThreads(this, n, ts);
  }
  vmtiError GetStackTrace(vmtiThread t, vmtiInt start, vmtiInt max, vmtiFrameInfo* f,
                          vmtiInt* count) {
    return functions->GetStackTrace(this, t, start, max, f, count);
  }
  vmtiError GetMethodName(vmtiMethodID m, char** n, char** s, char** g) {
    return functions->GetMethodName(this, m, n, s, g);
  }
  vmtiError GetLineNumber(vmtiMethodID m, vmtiLocation l, vmtiInt* line) {
    return functions->GetLineNumber(this, m, l, line);
  }
  vmtiError GetMethodSourceFile(vmtiMethodID m, char** s) {
    return functions->GetMethodSourceFile(this, m, s);
  }
  vmtiError GetObjectClass(vmtiObject o, vmtiClass* k) {
    return functions->GetObjectClass(this, o, k);
  }
  vmtiError GetClassSignature(vmtiClass k, char** s, char** g) {
    return functions->GetClassSignature(this, k, s, g);
  }
  vmtiError GetObjectSize(vmtiObject o, vmtiLong* s) {
    return functions->GetObjectSize(this, o, s);
  }
  vmtiError GetTag(vmtiObject o, vmtiLong* t) { return functions->GetTag(this, o, t); }
  vmtiError SetTag(vmtiObject o, vmtiLong t) { return functions->SetTag(this, o, t); }
  vmtiError NewWeakRef(vmtiObject o, vmtiWeak* w) { return functions->NewWeakRef(this, o, w); }
  vmtiError IsWeakRefCleared(vmtiWeak w, vmtiBool* c) {
    return functions->IsWeakRefCleared(this, w, c);
  }
  vmtiError DeleteWeakRef(vmtiWeak w) { return functions->DeleteWeakRef(this, w); }
  vmtiError GetObjectGeneration(vmtiObject o, vmtiGeneration* g) {
    return functions->GetObjectGeneration(this, o, g);
  }
  vmtiError GetSampleInfo(vmtiSampleInfo* i) { return functions->GetSampleInfo(this, i); }
  vmtiError ForceGarbageCollection() { return functions->ForceGarbageCollection(this); }
  vmtiError GetTime(vmtiLong* n) { return functions->GetTime(this, n); }
  vmtiError SetHeapSamplingRate(vmtiInt b) { return functions->SetHeapSamplingRate(this, b); }
  vmtiError GetThreadParent(vmtiThread t, vmtiThread* p) {
    return functions->GetThreadParent(this, t, p);
  }
  vmtiError GetFrameCount(vmtiThread t, vmtiInt* n) { return functions->GetFrameCount(this, t, n); }
  vmtiError GetAllStackTraces(vmtiInt max, vmtiStackInfo** info, vmtiInt* n) {
    return functions->GetAllStackTraces(this, max, info, n);
  }
  vmtiError GetThreadListStackTraces(vmtiInt n, const vmtiThread* list, vmtiInt max,
                                     vmtiStackInfo** info) {
    return functions->GetThreadListStackTraces(this, n, list, max, info);
  }
  vmtiError RunAgentThread(const char* name, vmtiStartFunction proc, const void* arg,
                           vmtiThread* t) {
    return functions->RunAgentThread(this, name, proc, arg, t);
  }
  vmtiError CreateRawMonitor(const char* name, vmtiRawMonitorID* m) {
    return functions->CreateRawMonitor(this, name, m);
  }
  vmtiError DestroyRawMonitor(vmtiRawMonitorID m) { return functions->DestroyRawMonitor(this, m); }
  vmtiError RawMonitorEnter(vmtiRawMonitorID m) { return functions->RawMonitorEnter(this, m); }
  vmtiError RawMonitorExit(vmtiRawMonitorID m) { return functions->RawMonitorExit(this, m); }
  vmtiError RawMonitorWait(vmtiRawMonitorID m, vmtiLong millis) {
    return functions->RawMonitorWait(this, m, millis);
  }
  vmtiError RawMonitorNotify(vmtiRawMonitorID m) { return functions->RawMonitorNotify(this, m); }
  vmtiError RawMonitorNotifyAll(vmtiRawMonitorID m) {
    return functions->RawMonitorNotifyAll(this, m);
  }
  vmtiError FollowReferences(vmtiInt heap_filter, vmtiClass klass, vmtiObject initial_object,
                             const vmtiHeapCallbacks* callbacks, const void* user_data) {
    return functions->FollowReferences(this, heap_filter, klass, initial_object, callbacks,
                                       user_data);
  }
  vmtiError IterateThroughHeap(vmtiInt heap_filter, vmtiClass klass,
                               const vmtiHeapCallbacks* callbacks, const void* user_data) {
    return functions->IterateThroughHeap(this, heap_filter, klass, callbacks, user_data);
  }
  vmtiError GetObjectsWithTags(vmtiInt tag_count, const vmtiLong* tags, vmtiInt* count_ptr,
                               vmtiObject** object_result_ptr, vmtiLong** tag_result_ptr) {
    return functions->GetObjectsWithTags(this, tag_count, tags, count_ptr, object_result_ptr,
                                         tag_result_ptr);
  }
  vmtiError GetFieldName(vmtiClass klass, vmtiInt index, char** name_ptr) {
    return functions->GetFieldName(this, klass, index, name_ptr);
  }
  vmtiError GetGlobalName(vmtiInt index, char** name_ptr) {
    return functions->GetGlobalName(this, index, name_ptr);
  }
  vmtiError GetLocalName(vmtiMethodID method, vmtiInt slot, char** name_ptr) {
    return functions->GetLocalName(this, method, slot, name_ptr);
  }
};

struct _vmtiVM {
  const struct vmtiVMInterface_* functions;
  const struct vmtiVMInterface_* operator->() const { return functions; }
  vmtiError GetEnv(void** penv, vmtiInt version) { return functions->GetEnv(this, penv, version); }
};

extern "C" {
#endif /* __cplusplus */

/* ---- Agent entry points --------------------------------------------- */

/* Called in VMTI_PHASE_ONLOAD, before the program starts. 0 = success;
 * anything else stops the VM (exit code 1) with a message naming the agent. */
VMTI_EXPORT vmtiInt Agent_OnLoad(vmtiVM* vm, char* options, void* reserved);

/* Optional: called in VMTI_PHASE_LIVE when the agent is loaded into a
 * running VM (`minivm-attach PID load`). 0 = success; anything else is
 * reported to minivm-attach, and the VM runs on. */
VMTI_EXPORT vmtiInt Agent_OnAttach(vmtiVM* vm, char* options, void* reserved);

/* Optional: called after VM death, before the library is unloaded. */
VMTI_EXPORT void Agent_OnUnload(vmtiVM* vm);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* VMTI_VMTI_H_ */
