#include "retention.h"

#include <cstdio>
#include <cstring>
#include <map>
#include <utility>

namespace agent {
namespace {

struct Node {
  int64_t parent;  // node number, 0 for a root
  vmtiClass klass;
  vmtiClass referrer_klass;
  int32_t index;  // field or element index, or the root's index in roots
  vmtiHeapReferenceKind kind;
};

struct Root {
  vmtiHeapReferenceKind kind;
  vmtiHeapReferenceInfo info;
};

struct Search {
  vmtiEnv* env;
  RetentionBudget budget;
  vmtiLong start_ns = 0;
  std::vector<Node> nodes;  // node number n is nodes[n - 1]
  std::vector<Root> roots;
  std::vector<int64_t> found;  // per query: the target's node number, or 0
  size_t open = 0;             // queries not answered yet
  bool cut_off = false;
};

vmtiInt SearchCallback(vmtiHeapReferenceKind kind, const vmtiHeapReferenceInfo* info,
                       vmtiClass klass, vmtiClass referrer_klass, vmtiLong, vmtiLong* tag_ptr,
                       vmtiLong* referrer_tag_ptr, vmtiInt, void* user_data) {
  auto* s = static_cast<Search*>(user_data);
  if (*tag_ptr > 0) return 0;  // reached before: already on a shorter path
  if (static_cast<int64_t>(s->nodes.size()) >= s->budget.max_objects) {
    s->cut_off = true;
    return VMTI_VISIT_ABORT;
  }
  if ((s->nodes.size() & 4095) == 0) {
    vmtiLong now = 0;
    (*s->env)->GetTime(s->env, &now);
    if (static_cast<double>(now - s->start_ns) > s->budget.max_seconds * 1e9) {
      s->cut_off = true;
      return VMTI_VISIT_ABORT;
    }
  }
  const int64_t query = *tag_ptr < 0 ? -*tag_ptr - 1 : -1;
  // The handles GetObjectsWithTags gave this search are roots of kind
  // OTHER: a target is not retained by them.
  if (query >= 0 && referrer_tag_ptr == nullptr && kind == VMTI_HEAP_REFERENCE_OTHER) return 0;
  Node n{referrer_tag_ptr != nullptr ? *referrer_tag_ptr : 0, klass, referrer_klass, 0, kind};
  if (kind == VMTI_HEAP_REFERENCE_FIELD) n.index = info->field.index;
  if (kind == VMTI_HEAP_REFERENCE_ARRAY_ELEMENT) n.index = info->array.index;
  if (referrer_tag_ptr == nullptr) {
    n.index = static_cast<int32_t>(s->roots.size());
    s->roots.push_back(Root{kind, *info});
  }
  s->nodes.push_back(n);
  *tag_ptr = static_cast<vmtiLong>(s->nodes.size());
  if (query >= 0 && static_cast<size_t>(query) < s->found.size() && s->found[query] == 0) {
    s->found[query] = *tag_ptr;
    if (--s->open == 0) return VMTI_VISIT_ABORT;  // every query answered
  }
  return VMTI_VISIT_OBJECTS;
}

// The second walk: clears every scratch tag, following only tagged objects.
vmtiInt UntagCallback(vmtiHeapReferenceKind, const vmtiHeapReferenceInfo*, vmtiClass, vmtiClass,
                      vmtiLong, vmtiLong* tag_ptr, vmtiLong*, vmtiInt, void*) {
  if (*tag_ptr == 0) return 0;
  *tag_ptr = 0;
  return VMTI_VISIT_OBJECTS;
}

std::string Take(vmtiEnv* env, char* s) {
  std::string out = s != nullptr ? s : "";
  (*env)->Deallocate(env, reinterpret_cast<unsigned char*>(s));
  return out;
}

class Namer {
 public:
  explicit Namer(vmtiEnv* env) : env_(env) {}

  std::string Class(vmtiClass k) {
    auto it = classes_.find(k);
    if (it != classes_.end()) return it->second;
    char* sig = nullptr;
    std::string name = (*env_)->GetClassSignature(env_, k, &sig, nullptr) == VMTI_ERROR_NONE
                           ? Take(env_, sig)
                           : "?";
    return classes_[k] = name;
  }

  std::string Link(const Node& n) {
    if (n.kind == VMTI_HEAP_REFERENCE_ARRAY_ELEMENT) {
      return Class(n.referrer_klass) + "[" + std::to_string(n.index) + "]";
    }
    auto key = std::make_pair(n.referrer_klass, n.index);
    auto it = fields_.find(key);
    if (it != fields_.end()) return it->second;
    char* name = nullptr;
    std::string field = (*env_)->GetFieldName(env_, n.referrer_klass, n.index, &name) ==
                                VMTI_ERROR_NONE
                            ? Take(env_, name)
                            : "field " + std::to_string(n.index);
    return fields_[key] = Class(n.referrer_klass) + "." + field;
  }

  // "global cache", "local held of holder (leak.mv:12) on thread thread-1".
  std::string Root(const agent::Root& r, std::string* kind) {
    if (r.kind == VMTI_HEAP_REFERENCE_GLOBAL) {
      *kind = "global";
      char* name = nullptr;
      if ((*env_)->GetGlobalName(env_, r.info.global.index, &name) != VMTI_ERROR_NONE) {
        return "global #" + std::to_string(r.info.global.index);
      }
      return "global " + Take(env_, name);
    }
    if (r.kind == VMTI_HEAP_REFERENCE_STACK_LOCAL) {
      *kind = "local";
      const vmtiHeapReferenceInfoStackLocal& l = r.info.stack_local;
      char* s = nullptr;
      std::string local = (*env_)->GetLocalName(env_, l.method, l.slot, &s) == VMTI_ERROR_NONE
                              ? "local " + Take(env_, s)
                              : "operand stack slot " + std::to_string(l.slot);
      std::string fn = (*env_)->GetMethodName(env_, l.method, &s, nullptr, nullptr) ==
                               VMTI_ERROR_NONE
                           ? Take(env_, s)
                           : "?";
      std::string where;
      vmtiInt line = 0;
      if ((*env_)->GetMethodSourceFile(env_, l.method, &s) == VMTI_ERROR_NONE) {
        where = Take(env_, s);
        const size_t slash = where.rfind('/');
        if (slash != std::string::npos) where = where.substr(slash + 1);
        if ((*env_)->GetLineNumber(env_, l.method, l.location, &line) == VMTI_ERROR_NONE) {
          where += ":" + std::to_string(line);
        }
      }
      vmtiThreadInfo ti;
      std::memset(&ti, 0, sizeof ti);
      std::string thread = (*env_)->GetThreadInfo(env_, l.thread, &ti) == VMTI_ERROR_NONE
                               ? Take(env_, ti.name)
                               : "?";
      return local + " of " + fn + (where.empty() ? "" : " (" + where + ")") + " on thread " +
             thread;
    }
    *kind = "other";
    return "VM root";
  }

 private:
  vmtiEnv* env_;
  std::map<vmtiClass, std::string> classes_;
  std::map<std::pair<vmtiClass, int32_t>, std::string> fields_;
};

}  // namespace

vmtiEnv* NewWalkEnvironment(vmtiVM* vm, const char* agent) {
  vmtiEnv* env = nullptr;
  vmtiError err = vm == nullptr ? VMTI_ERROR_NULL_POINTER
                                : (*vm)->GetEnv(vm, reinterpret_cast<void**>(&env), VMTI_VERSION_1);
  if (err == VMTI_ERROR_NONE) {
    vmtiCapabilities caps;
    std::memset(&caps, 0, sizeof caps);
    caps.can_tag_objects = 1;
    err = (*env)->AddCapabilities(env, &caps);
    if (err != VMTI_ERROR_NONE) (*env)->DisposeEnvironment(env);
  }
  if (err != VMTI_ERROR_NONE) {
    std::fprintf(stderr, "%s: cannot make the environment for paths to GC roots (error %d)\n",
                 agent, static_cast<int>(err));
    return nullptr;
  }
  return env;
}

std::string WithCommas(int64_t n) {
  std::string digits = std::to_string(n < 0 ? -n : n);
  std::string out;
  for (size_t i = 0; i < digits.size(); i++) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return n < 0 ? "-" + out : out;
}

std::string RetentionPath::Text() const {
  switch (status) {
    case Status::kCutOff:
      return "not found within the search budget (cut off)";
    case Status::kUnreachable:
      return "no sampled object of this site is reachable from a root any more";
    case Status::kNoObjects:
      return "no sampled object of this site is in the heap";
    case Status::kFound:
      break;
  }
  std::string out;
  for (size_t i = 0; i < links.size();) {
    size_t j = i;
    // The first link is the root and the last the target: only the
    // references between them fold.
    while (i > 0 && j + 1 < links.size() - 1 && links[j + 1] == links[i]) j++;
    if (i > 0) out += " -> ";
    out += links[i];
    if (j > i) out += " x " + WithCommas(static_cast<int64_t>(j - i + 1));
    i = j + 1;
  }
  return out;
}

std::string RetentionPath::Prefix(size_t n) const {
  if (status != Status::kFound || links.empty()) return std::string();
  std::string out = links[0];
  for (size_t i = 1; i < links.size() && i <= n; i++) {
    std::string link = links[i];
    const size_t bracket = link.find('[');
    if (bracket != std::string::npos) link = link.substr(0, bracket) + "[]";
    out += " -> " + link;
  }
  return out;
}

RetentionResult FindRetentionPaths(vmtiEnv* tag_env, vmtiEnv* walk_env,
                                   const std::vector<std::vector<vmtiLong>>& queries,
                                   const RetentionBudget& budget) {
  RetentionResult result;
  result.paths.resize(queries.size());
  if ((*walk_env)->FollowReferences == nullptr || (*tag_env)->GetObjectsWithTags == nullptr ||
      (*walk_env)->GetFieldName == nullptr || (*walk_env)->GetGlobalName == nullptr ||
      (*walk_env)->GetLocalName == nullptr) {
    result.unsupported = true;
    return result;
  }
  vmtiLong t0 = 0, t1 = 0;
  (*walk_env)->GetTime(walk_env, &t0);
  // Mark the targets: -(query + 1) in the scratch environment.
  std::vector<vmtiObject> targets;
  size_t with_objects = 0;
  for (size_t q = 0; q < queries.size(); q++) {
    if (queries[q].empty()) continue;
    vmtiInt n = 0;
    vmtiObject* objects = nullptr;
    vmtiError err = (*tag_env)->GetObjectsWithTags(tag_env, static_cast<vmtiInt>(queries[q].size()),
                                                   queries[q].data(), &n, &objects, nullptr);
    if (err != VMTI_ERROR_NONE) {
      result.error = "GetObjectsWithTags failed (error " + std::to_string(err) + ")";
      return result;
    }
    for (vmtiInt i = 0; i < n; i++) {
      if ((*walk_env)->SetTag(walk_env, objects[i], -static_cast<vmtiLong>(q) - 1) ==
          VMTI_ERROR_NONE) {
        targets.push_back(objects[i]);
      }
    }
    if (n > 0) {
      with_objects++;
      result.paths[q].status = RetentionPath::Status::kUnreachable;
    }
    (*tag_env)->Deallocate(tag_env, reinterpret_cast<unsigned char*>(objects));
  }
  Search s;
  s.env = walk_env;
  s.budget = budget;
  s.start_ns = t0;
  s.found.assign(queries.size(), 0);
  s.open = with_objects;
  vmtiHeapCallbacks callbacks;
  std::memset(&callbacks, 0, sizeof callbacks);
  callbacks.heap_reference_callback = &SearchCallback;
  vmtiError err = VMTI_ERROR_NONE;
  if (s.open > 0) err = (*walk_env)->FollowReferences(walk_env, 0, nullptr, nullptr, &callbacks, &s);
  // Read the paths while the names can still be resolved (threads alive).
  Namer namer(walk_env);
  for (size_t q = 0; q < queries.size(); q++) {
    RetentionPath& p = result.paths[q];
    if (p.status == RetentionPath::Status::kNoObjects) continue;
    if (s.found[q] == 0) {
      if (s.cut_off) p.status = RetentionPath::Status::kCutOff;
      continue;
    }
    p.status = RetentionPath::Status::kFound;
    std::vector<const Node*> chain;
    for (int64_t n = s.found[q]; n != 0; n = s.nodes[n - 1].parent) chain.push_back(&s.nodes[n - 1]);
    const Node* root = chain.back();
    p.links.push_back(namer.Root(s.roots[root->index], &p.root_kind));
    for (size_t i = chain.size() - 1; i-- > 0;) p.links.push_back(namer.Link(*chain[i]));
    p.links.push_back(namer.Class(chain.front()->klass));
  }
  result.visited = static_cast<int64_t>(s.nodes.size());
  result.cut_off = s.cut_off;
  // Clear the scratch tags (retention.h .scratch-tags).
  if (!s.nodes.empty()) {
    callbacks.heap_reference_callback = &UntagCallback;
    (*walk_env)->FollowReferences(walk_env, 0, nullptr, nullptr, &callbacks, nullptr);
  }
  for (vmtiObject o : targets) (*walk_env)->SetTag(walk_env, o, 0);
  (*walk_env)->GetTime(walk_env, &t1);
  result.pause_ms = static_cast<double>(t1 - t0) / 1e6;
  if (err != VMTI_ERROR_NONE) result.error = "FollowReferences failed (error " + std::to_string(err) + ")";
  return result;
}

}  // namespace agent
