/*
 * heapwalk: FollowReferences, IterateThroughHeap, GetObjectsWithTags and
 * the name functions (the second edition's "Heap walking").
 *
 * At interval 0 it tags every Node (tags 1, 2, ... in allocation order) and
 * every Array (101, 102, ...). In the callback for the one Trigger the
 * program allocates, it walks the heap from the roots and records, for
 * every reference to a tagged object, one line naming the edge by its kind
 * (`global NAME`, `stack THREAD FUNCTION:LOCAL depth=D`, `CLASS#N.FIELD`,
 * `Array#N[I]`, `other`), then checks filters, abort, a walk from one
 * object, IterateThroughHeap, tag writes, GetObjectsWithTags across a
 * collection, and every misuse error. At VMDeath it prints the sorted edge
 * lines (a reference reported twice would show as `x2`), then PASS or FAIL
 * lines; Agent_OnUnload checks the DEAD phase.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_agent.h"

#define MAX_LINES 256
#define LINE_LEN 256

static vmtiEnv* g_env;
static vmtiEnv* g_plain_env; /* without can_tag_objects */
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static long long g_nodes, g_arrays;
static vmtiClass g_node_class, g_thread_class;
static char g_lines[MAX_LINES][LINE_LEN];
static int g_line_count;
static int g_failures;
static char g_fail[16][200];
static int g_triggered;
static char g_notes[8][400];
static int g_note_count;

static void fail(const char* what, long long got, long long want) {
  if (g_failures < 16) {
    snprintf(g_fail[g_failures], sizeof g_fail[0], "%s (got %lld, want %lld)", what, got, want);
  }
  g_failures++;
}

#define CHECK_ERR(call, want)                             \
  do {                                                    \
    vmtiError e_ = (call);                                \
    if (e_ != (want)) fail(#call, (long long)e_, (want)); \
  } while (0)

static void note(const char* s) {
  if (g_note_count < 8) snprintf(g_notes[g_note_count++], sizeof g_notes[0], "%s", s);
}

static void class_name(vmtiClass k, char* buf, size_t len) {
  char* sig = NULL;
  if (k == NULL || (*g_env)->GetClassSignature(g_env, k, &sig, NULL) != VMTI_ERROR_NONE) {
    snprintf(buf, len, "?");
    return;
  }
  snprintf(buf, len, "%s", sig);
  (*g_env)->Deallocate(g_env, (unsigned char*)sig);
}

/* Node#3, Array#1, or the class name alone for an untagged object. */
static void object_name(vmtiClass k, vmtiLong tag, char* buf, size_t len) {
  char cls[40];
  class_name(k, cls, sizeof cls);
  if (tag > 0 && tag < 100) {
    snprintf(buf, len, "%s#%lld", cls, (long long)tag);
  } else if (tag > 100 && tag < 200) {
    snprintf(buf, len, "%s#%lld", cls, (long long)(tag - 100));
  } else {
    snprintf(buf, len, "%s", cls);
  }
}

static void edge_name(vmtiHeapReferenceKind kind, const vmtiHeapReferenceInfo* info,
                      vmtiClass referrer_klass, vmtiLong referrer_tag, char* buf, size_t len) {
  char who[80], name[64];
  char* s = NULL;
  switch (kind) {
    case VMTI_HEAP_REFERENCE_GLOBAL:
      if ((*g_env)->GetGlobalName(g_env, info->global.index, &s) != VMTI_ERROR_NONE) s = NULL;
      snprintf(buf, len, "global %s", s ? s : "?");
      break;
    case VMTI_HEAP_REFERENCE_STACK_LOCAL: {
      vmtiThreadInfo ti;
      char* method = NULL;
      memset(&ti, 0, sizeof ti);
      (*g_env)->GetThreadInfo(g_env, info->stack_local.thread, &ti);
      (*g_env)->GetMethodName(g_env, info->stack_local.method, &method, NULL, NULL);
      if ((*g_env)->GetLocalName(g_env, info->stack_local.method, info->stack_local.slot, &s) !=
          VMTI_ERROR_NONE) {
        s = NULL;
      }
      if (s != NULL) {
        snprintf(name, sizeof name, "%s", s);
      } else {
        snprintf(name, sizeof name, "slot%d", (int)info->stack_local.slot);
      }
      snprintf(buf, len, "stack %s %s:%s depth=%d", ti.name ? ti.name : "?", method ? method : "?",
               name, (int)info->stack_local.depth);
      (*g_env)->Deallocate(g_env, (unsigned char*)ti.name);
      (*g_env)->Deallocate(g_env, (unsigned char*)method);
      break;
    }
    case VMTI_HEAP_REFERENCE_FIELD:
      object_name(referrer_klass, referrer_tag, who, sizeof who);
      if ((*g_env)->GetFieldName(g_env, referrer_klass, info->field.index, &s) != VMTI_ERROR_NONE) {
        s = NULL;
      }
      snprintf(buf, len, "%s.%s", who, s ? s : "?");
      break;
    case VMTI_HEAP_REFERENCE_ARRAY_ELEMENT:
      object_name(referrer_klass, referrer_tag, who, sizeof who);
      snprintf(buf, len, "%s[%d]", who, (int)info->array.index);
      break;
    default:
      snprintf(buf, len, "other");
      break;
  }
  (*g_env)->Deallocate(g_env, (unsigned char*)s);
}

/* ---- The full walk --------------------------------------------------- */

static int g_in_callback_checked;
static long long g_tagged_refs, g_node_refs, g_all_refs, g_untagged_refs;
static int g_trigger_tagged;

static void misuse_inside_callback(vmtiClass klass) {
  vmtiHeapCallbacks cbs;
  vmtiFrameInfo frames[4];
  vmtiInt n = 0;
  vmtiLong one = 1;
  char* sig = NULL;
  vmtiLong now = 0;
  memset(&cbs, 0, sizeof cbs);
  /* Needs a safepoint, collects or walks: WRONG_PHASE, never a deadlock. */
  CHECK_ERR((*g_env)->ForceGarbageCollection(g_env), VMTI_ERROR_WRONG_PHASE);
  CHECK_ERR((*g_env)->FollowReferences(g_env, 0, NULL, NULL, &cbs, NULL), VMTI_ERROR_WRONG_PHASE);
  CHECK_ERR((*g_env)->IterateThroughHeap(g_env, 0, NULL, &cbs, NULL), VMTI_ERROR_WRONG_PHASE);
  CHECK_ERR((*g_env)->GetObjectsWithTags(g_env, 1, &one, &n, NULL, NULL), VMTI_ERROR_WRONG_PHASE);
  CHECK_ERR((*g_env)->GetStackTrace(g_env, NULL, 0, 4, frames, &n), VMTI_ERROR_WRONG_PHASE);
  CHECK_ERR((*g_env)->SetEventNotificationMode(g_env, VMTI_DISABLE, VMTI_EVENT_THREAD_START, NULL),
            VMTI_ERROR_WRONG_PHASE);
  CHECK_ERR((*g_env)->SetHeapSamplingInterval(g_env, 0), VMTI_ERROR_WRONG_PHASE);
  /* Reading names and the clock is fine. */
  CHECK_ERR((*g_env)->GetClassSignature(g_env, klass, &sig, NULL), VMTI_ERROR_NONE);
  (*g_env)->Deallocate(g_env, (unsigned char*)sig);
  CHECK_ERR((*g_env)->GetTime(g_env, &now), VMTI_ERROR_NONE);
}

static vmtiInt on_reference(vmtiHeapReferenceKind kind, const vmtiHeapReferenceInfo* info,
                            vmtiClass klass, vmtiClass referrer_klass, vmtiLong size,
                            vmtiLong* tag_ptr, vmtiLong* referrer_tag_ptr, vmtiInt length,
                            void* user_data) {
  (void)user_data;
  char edge[96], target[64];
  if (!g_in_callback_checked) {
    g_in_callback_checked = 1;
    misuse_inside_callback(klass);
  }
  g_all_refs++;
  if ((referrer_tag_ptr == NULL) != (referrer_klass == NULL))
    fail("referrer_tag_ptr vs klass", 0, 0);
  if (referrer_tag_ptr == NULL && kind != VMTI_HEAP_REFERENCE_GLOBAL &&
      kind != VMTI_HEAP_REFERENCE_STACK_LOCAL && kind != VMTI_HEAP_REFERENCE_OTHER) {
    fail("root kind", kind, 0);
  }
  if (klass == g_node_class) {
    g_node_refs++;
    if (size != 16 + 8 * 3 || length != -1) fail("Node size/length", size, length);
  }
  if (*tag_ptr == 0) g_untagged_refs++;
  /* The Trigger (reached through the sample root) gets a tag by the walk. */
  if (*tag_ptr == 0 && kind == VMTI_HEAP_REFERENCE_OTHER) {
    char cls[32];
    class_name(klass, cls, sizeof cls);
    if (strcmp(cls, "Trigger") == 0) {
      *tag_ptr = 999;
      g_trigger_tagged++;
    }
  }
  if (*tag_ptr <= 0 || *tag_ptr >= 200) return VMTI_VISIT_OBJECTS;
  g_tagged_refs++;
  if (klass != NULL) {
    char cls[32];
    class_name(klass, cls, sizeof cls);
    if (strcmp(cls, "Array") == 0 && length != 3) fail("Array length", length, 3);
  }
  edge_name(kind, info, referrer_klass, referrer_tag_ptr ? *referrer_tag_ptr : 0, edge,
            sizeof edge);
  object_name(klass, *tag_ptr, target, sizeof target);
  if (g_line_count < MAX_LINES) {
    snprintf(g_lines[g_line_count++], LINE_LEN, "%s -> %s", edge, target);
  }
  return VMTI_VISIT_OBJECTS;
}

/* ---- Filters, abort, one object, iteration --------------------------- */

static long long g_count, g_bad;
static vmtiInt count_refs(vmtiHeapReferenceKind kind, const vmtiHeapReferenceInfo* info,
                          vmtiClass klass, vmtiClass referrer_klass, vmtiLong size,
                          vmtiLong* tag_ptr, vmtiLong* referrer_tag_ptr, vmtiInt length,
                          void* user_data) {
  (void)kind, (void)info, (void)referrer_klass, (void)size, (void)referrer_tag_ptr, (void)length;
  const int filter = *(const int*)user_data;
  g_count++;
  if (filter == 1 && klass != g_node_class) g_bad++; /* klass = Node */
  if (filter == 2 && *tag_ptr == 0) g_bad++;         /* untagged left out */
  if (filter == 3 && *tag_ptr != 0) g_bad++;         /* tagged left out */
  return filter == 4 ? VMTI_VISIT_ABORT : VMTI_VISIT_OBJECTS;
}

static char g_from[256];
static vmtiInt from_one(vmtiHeapReferenceKind kind, const vmtiHeapReferenceInfo* info,
                        vmtiClass klass, vmtiClass referrer_klass, vmtiLong size, vmtiLong* tag_ptr,
                        vmtiLong* referrer_tag_ptr, vmtiInt length, void* user_data) {
  (void)size, (void)length, (void)user_data;
  char edge[96], target[64];
  edge_name(kind, info, referrer_klass, referrer_tag_ptr ? *referrer_tag_ptr : 0, edge,
            sizeof edge);
  object_name(klass, *tag_ptr, target, sizeof target);
  size_t n = strlen(g_from);
  snprintf(g_from + n, sizeof g_from - n, "%s%s -> %s", n ? ", " : "", edge, target);
  return 0; /* do not go on: only the object's own references */
}

static long long g_iter_nodes, g_iter_node_bytes, g_iter_calls;
static vmtiInt iterate(vmtiClass klass, vmtiLong size, vmtiLong* tag_ptr, vmtiInt length,
                       void* user_data) {
  (void)length, (void)user_data;
  g_iter_calls++;
  if (klass != g_node_class) g_bad++;
  if (*tag_ptr == 7) g_bad += 100; /* the garbage Node: held only by its tag's weak slot */
  g_iter_nodes++;
  g_iter_node_bytes += size;
  return 0;
}

static vmtiInt find_thread_class(vmtiClass klass, vmtiLong size, vmtiLong* tag_ptr, vmtiInt length,
                                 void* user_data) {
  (void)size, (void)tag_ptr, (void)length, (void)user_data;
  char cls[32];
  class_name(klass, cls, sizeof cls);
  if (strcmp(cls, "Thread") == 0) g_thread_class = klass;
  return 0;
}

static vmtiInt abort_iteration(vmtiClass klass, vmtiLong size, vmtiLong* tag_ptr, vmtiInt length,
                               void* user_data) {
  (void)klass, (void)size, (void)tag_ptr, (void)length, (void)user_data;
  g_iter_calls++;
  return VMTI_VISIT_ABORT;
}

static void walk(vmtiEnv* env, vmtiObject trigger) {
  vmtiHeapCallbacks cbs;
  memset(&cbs, 0, sizeof cbs);
  cbs.heap_reference_callback = &on_reference;
  CHECK_ERR((*env)->FollowReferences(env, 0, NULL, NULL, &cbs, NULL), VMTI_ERROR_NONE);
  if (g_trigger_tagged != 1)
    fail("Trigger reached once through the sample root", g_trigger_tagged, 1);
  vmtiLong tag = 0;
  CHECK_ERR((*env)->GetTag(env, trigger, &tag), VMTI_ERROR_NONE);
  if (tag != 999) fail("a tag written by the walk", tag, 999);

  /* Filters: the walk still follows what it leaves out. */
  char buf[400];
  int filter;
  cbs.heap_reference_callback = &count_refs;
  filter = 1, g_count = 0, g_bad = 0;
  CHECK_ERR((*env)->FollowReferences(env, 0, g_node_class, NULL, &cbs, &filter), VMTI_ERROR_NONE);
  if (g_count != g_node_refs || g_bad != 0) fail("klass filter", g_count, g_node_refs);
  filter = 2, g_count = 0, g_bad = 0;
  CHECK_ERR((*env)->FollowReferences(env, VMTI_HEAP_FILTER_UNTAGGED, NULL, NULL, &cbs, &filter),
            VMTI_ERROR_NONE);
  if (g_count != g_all_refs - g_untagged_refs + 1 || g_bad != 0) {
    /* + 1: the Trigger is tagged now. */
    fail("untagged filter", g_count, g_all_refs - g_untagged_refs + 1);
  }
  filter = 3, g_count = 0, g_bad = 0;
  CHECK_ERR((*env)->FollowReferences(env, VMTI_HEAP_FILTER_TAGGED, NULL, NULL, &cbs, &filter),
            VMTI_ERROR_NONE);
  if (g_count != g_untagged_refs - 1 || g_bad != 0)
    fail("tagged filter", g_count, g_untagged_refs - 1);
  filter = 4, g_count = 0;
  CHECK_ERR((*env)->FollowReferences(env, 0, NULL, NULL, &cbs, &filter), VMTI_ERROR_NONE);
  if (g_count != 1) fail("abort", g_count, 1);
  snprintf(buf, sizeof buf, "refs to Nodes %lld, to tagged objects %lld", g_node_refs,
           g_tagged_refs);
  note(buf);

  /* GetObjectsWithTags: the garbage Node#7 may or may not be collected yet
   * (it is under --gc-stress); Node#4 is live. Without object handles asked
   * for, nothing is held. */
  vmtiLong wanted[2] = {4, 7};
  vmtiInt n = -1;
  vmtiObject* objects = NULL;
  vmtiLong* tags = NULL;
  CHECK_ERR((*env)->GetObjectsWithTags(env, 2, wanted, &n, NULL, &tags), VMTI_ERROR_NONE);
  if (n < 1 || n > 2 || (tags[0] != 4 && (n < 2 || tags[1] != 4))) fail("tags 4 and 7", n, 2);
  (*env)->Deallocate(env, (unsigned char*)tags);
  CHECK_ERR((*env)->GetObjectsWithTags(env, 1, wanted, &n, &objects, &tags), VMTI_ERROR_NONE);
  vmtiObject node4 = n == 1 && tags[0] == 4 ? objects[0] : NULL;
  snprintf(buf, sizeof buf, "with tag 4: %d objects", (int)n);
  note(buf);
  /* A walk from one object: its own references only. */
  cbs.heap_reference_callback = &from_one;
  CHECK_ERR((*env)->FollowReferences(env, 0, NULL, node4, &cbs, NULL), VMTI_ERROR_NONE);
  snprintf(buf, sizeof buf, "from Node#4: %s", g_from);
  note(buf);
  /* The handles are roots: they survive a collection, which frees Node#7. */
  CHECK_ERR((*env)->ForceGarbageCollection(env), VMTI_ERROR_NONE);
  tag = 0;
  CHECK_ERR((*env)->GetTag(env, node4, &tag), VMTI_ERROR_NONE);
  if (tag != 4) fail("GetObjectsWithTags handle after a collection", tag, 4);
  vmtiInt n2 = -1;
  CHECK_ERR((*env)->GetObjectsWithTags(env, 2, wanted, &n2, NULL, NULL), VMTI_ERROR_NONE);
  snprintf(buf, sizeof buf, "after a collection: %d objects", (int)n2);
  note(buf);
  (*env)->Deallocate(env, (unsigned char*)objects);
  (*env)->Deallocate(env, (unsigned char*)tags);

  /* IterateThroughHeap: every live Node once, never the collected one. */
  cbs.heap_iteration_callback = &iterate;
  g_bad = 0;
  CHECK_ERR((*env)->IterateThroughHeap(env, 0, g_node_class, &cbs, NULL), VMTI_ERROR_NONE);
  snprintf(buf, sizeof buf, "iterate Node: %lld objects, %lld bytes", g_iter_nodes,
           g_iter_node_bytes);
  note(buf);
  if (g_bad != 0) fail("iteration filter", g_bad, 0);
  cbs.heap_iteration_callback = &find_thread_class;
  CHECK_ERR((*env)->IterateThroughHeap(env, 0, NULL, &cbs, NULL), VMTI_ERROR_NONE);
  cbs.heap_iteration_callback = &abort_iteration;
  g_iter_calls = 0;
  CHECK_ERR((*env)->IterateThroughHeap(env, 0, NULL, &cbs, NULL), VMTI_ERROR_NONE);
  if (g_iter_calls != 1) fail("iteration abort", g_iter_calls, 1);

  /* Misuse outside callbacks. */
  CHECK_ERR((*env)->FollowReferences(env, 0, NULL, NULL, NULL, NULL), VMTI_ERROR_NULL_POINTER);
  memset(&cbs, 0, sizeof cbs);
  CHECK_ERR((*env)->FollowReferences(env, 0, NULL, NULL, &cbs, NULL), VMTI_ERROR_NULL_POINTER);
  CHECK_ERR((*env)->IterateThroughHeap(env, 0, NULL, &cbs, NULL), VMTI_ERROR_NULL_POINTER);
  CHECK_ERR((*env)->IterateThroughHeap(env, 0, NULL, NULL, NULL), VMTI_ERROR_NULL_POINTER);
  cbs.heap_reference_callback = &count_refs;
  cbs.heap_iteration_callback = &iterate;
  CHECK_ERR((*env)->FollowReferences(env, 0x1, NULL, NULL, &cbs, &filter),
            VMTI_ERROR_ILLEGAL_ARGUMENT);
  CHECK_ERR((*env)->FollowReferences(env, 0, (vmtiClass)&cbs, NULL, &cbs, &filter),
            VMTI_ERROR_INVALID_CLASS);
  CHECK_ERR((*env)->FollowReferences(env, 0, NULL, (vmtiObject)(uintptr_t)0xdead, &cbs, &filter),
            VMTI_ERROR_INVALID_OBJECT);
  CHECK_ERR((*env)->IterateThroughHeap(env, 0, (vmtiClass)&cbs, &cbs, NULL),
            VMTI_ERROR_INVALID_CLASS);
  CHECK_ERR((*g_plain_env)->FollowReferences(g_plain_env, 0, NULL, NULL, &cbs, &filter),
            VMTI_ERROR_MUST_POSSESS_CAPABILITY);
  CHECK_ERR((*g_plain_env)->IterateThroughHeap(g_plain_env, 0, NULL, &cbs, NULL),
            VMTI_ERROR_MUST_POSSESS_CAPABILITY);
  CHECK_ERR((*g_plain_env)->GetObjectsWithTags(g_plain_env, 1, wanted, &n, NULL, NULL),
            VMTI_ERROR_MUST_POSSESS_CAPABILITY);
  /* The naming functions belong to heap walking's capability too (the
     contract's section heading). */
  char* name = NULL;
  CHECK_ERR((*g_plain_env)->GetGlobalName(g_plain_env, 0, &name),
            VMTI_ERROR_MUST_POSSESS_CAPABILITY);
  CHECK_ERR((*g_plain_env)->GetFieldName(g_plain_env, g_node_class, 0, &name),
            VMTI_ERROR_MUST_POSSESS_CAPABILITY);
  CHECK_ERR((*g_plain_env)->GetLocalName(g_plain_env, NULL, 0, &name),
            VMTI_ERROR_MUST_POSSESS_CAPABILITY);
  CHECK_ERR((*env)->GetObjectsWithTags(env, -1, wanted, &n, NULL, NULL),
            VMTI_ERROR_ILLEGAL_ARGUMENT);
  vmtiLong zero = 0;
  CHECK_ERR((*env)->GetObjectsWithTags(env, 1, &zero, &n, NULL, NULL), VMTI_ERROR_ILLEGAL_ARGUMENT);
  CHECK_ERR((*env)->GetObjectsWithTags(env, 1, NULL, &n, NULL, NULL), VMTI_ERROR_NULL_POINTER);
  CHECK_ERR((*env)->GetObjectsWithTags(env, 1, wanted, NULL, NULL, NULL), VMTI_ERROR_NULL_POINTER);

  /* Names. */
  char* s = NULL;
  CHECK_ERR((*env)->GetGlobalName(env, -1, &s), VMTI_ERROR_ILLEGAL_ARGUMENT);
  CHECK_ERR((*env)->GetGlobalName(env, 1000, &s), VMTI_ERROR_ILLEGAL_ARGUMENT);
  CHECK_ERR((*env)->GetGlobalName(env, 0, NULL), VMTI_ERROR_NULL_POINTER);
  CHECK_ERR((*env)->GetGlobalName(env, 0, &s), VMTI_ERROR_NONE);
  if (s == NULL || strcmp(s, "head") != 0) fail("global 0 is head", 0, 0);
  (*env)->Deallocate(env, (unsigned char*)s);
  CHECK_ERR((*env)->GetFieldName(env, g_node_class, 3, &s), VMTI_ERROR_ILLEGAL_ARGUMENT);
  CHECK_ERR((*env)->GetFieldName(env, g_node_class, -1, &s), VMTI_ERROR_ILLEGAL_ARGUMENT);
  CHECK_ERR((*env)->GetFieldName(env, (vmtiClass)&cbs, 0, &s), VMTI_ERROR_INVALID_CLASS);
  if (g_thread_class == NULL) {
    fail("IterateThroughHeap reports the Thread object", 0, 1);
  } else {
    CHECK_ERR((*env)->GetFieldName(env, g_thread_class, 0, &s), VMTI_ERROR_NOT_AVAILABLE);
  }
  CHECK_ERR((*env)->GetLocalName(env, (vmtiMethodID)(uintptr_t)0x7fffffff, 0, &s),
            VMTI_ERROR_INVALID_METHODID);
}

/* ---- Events ---------------------------------------------------------- */

static void on_sample(vmtiEnv* env, vmtiThread thread, vmtiObject object, vmtiClass klass,
                      vmtiLong size) {
  (void)thread, (void)size;
  char cls[32];
  class_name(klass, cls, sizeof cls);
  pthread_mutex_lock(&g_lock);
  vmtiLong tag = 0;
  if (strcmp(cls, "Node") == 0) {
    g_node_class = klass;
    tag = ++g_nodes;
  } else if (strcmp(cls, "Array") == 0) {
    tag = 100 + ++g_arrays;
  }
  pthread_mutex_unlock(&g_lock);
  if (tag != 0) CHECK_ERR((*env)->SetTag(env, object, tag), VMTI_ERROR_NONE);
  if (strcmp(cls, "Trigger") == 0 && !g_triggered) {
    g_triggered = 1;
    walk(env, object);
  }
}

static int compare_lines(const void* a, const void* b) { return strcmp(a, b); }

static void on_death(vmtiEnv* env) {
  (void)env;
  qsort(g_lines, (size_t)g_line_count, LINE_LEN, compare_lines);
  for (int i = 0; i < g_line_count;) {
    int j = i;
    while (j < g_line_count && strcmp(g_lines[i], g_lines[j]) == 0) j++;
    if (j - i > 1) {
      printf("%s x%d\n", g_lines[i], j - i);
    } else {
      printf("%s\n", g_lines[i]);
    }
    i = j;
  }
  for (int i = 0; i < g_note_count; i++) printf("%s\n", g_notes[i]);
  if (!g_triggered) fail("no Trigger", 0, 1);
  for (int i = 0; i < g_failures && i < 16; i++) printf("FAIL heapwalk: %s\n", g_fail[i]);
  if (g_failures == 0) printf("PASS heapwalk\n");
  fflush(stdout);
}

VMTI_EXPORT vmtiInt Agent_OnLoad(vmtiVM* vm, char* options, void* reserved) {
  (void)options, (void)reserved;
  g_env = TestAgentEnv(vm);
  g_plain_env = g_env ? TestAgentEnv(vm) : NULL;
  if (!g_plain_env) return 1;
  vmtiCapabilities caps;
  TestAgentCapabilities(TA_SAMPLED_ALLOC | TA_TAG_OBJECTS, &caps);
  if ((*g_env)->AddCapabilities(g_env, &caps) != VMTI_ERROR_NONE) return 1;
  /* Not in ONLOAD. */
  vmtiHeapCallbacks cbs;
  memset(&cbs, 0, sizeof cbs);
  cbs.heap_reference_callback = &count_refs;
  if ((*g_env)->FollowReferences(g_env, 0, NULL, NULL, &cbs, NULL) != VMTI_ERROR_WRONG_PHASE) {
    return 1;
  }
  static const vmtiEvent kEvents[] = {VMTI_EVENT_SAMPLED_OBJECT_ALLOC, VMTI_EVENT_VM_DEATH, 0};
  TestAgentSetup s = {.callbacks = {.SampledObjectAlloc = &on_sample, .VMDeath = &on_death},
                      .set_interval = TA_SET_INTERVAL, .interval = 0, .events = kEvents};
  return TestAgentSetUp(g_env, &s) == VMTI_ERROR_NONE ? 0 : 1;
}

VMTI_EXPORT void Agent_OnUnload(vmtiVM* vm) {
  (void)vm;
  vmtiHeapCallbacks cbs;
  memset(&cbs, 0, sizeof cbs);
  cbs.heap_reference_callback = &count_refs;
  vmtiError err = (*g_env)->FollowReferences(g_env, 0, NULL, NULL, &cbs, NULL);
  printf("dead phase: %s\n", err == VMTI_ERROR_WRONG_PHASE ? "WRONG_PHASE" : "unexpected");
  fflush(stdout);
}
