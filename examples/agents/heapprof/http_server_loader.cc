// LoadHttpServer (http_server.h .module): part of libheapprof.so,
// which must not link cpp-httplib itself.
#include <dlfcn.h>

#include <string>

#include "http_server.h"

namespace heapprof {

std::unique_ptr<HttpServer> LoadHttpServer(std::string* error) {
  Dl_info self;
  if (dladdr(reinterpret_cast<void*>(&LoadHttpServer), &self) == 0 || self.dli_fname == nullptr) {
    *error = "cannot find the folder of libheapprof.so";
    return nullptr;
  }
  std::string path = self.dli_fname;
  size_t slash = path.rfind('/');
  path = (slash == std::string::npos ? std::string(".") : path.substr(0, slash)) +
         "/libheapprof_http.so";
  // Never closed: its threads may outlive any scope here.
  void* module = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (module == nullptr) {
    const char* why = dlerror();
    *error = "cannot load " + path + ": " + (why != nullptr ? why : "unknown error");
    return nullptr;
  }
  auto make = reinterpret_cast<NewHttpServerFn>(dlsym(module, kNewHttpServerSymbol));
  if (make == nullptr) {
    *error = path + " has no " + kNewHttpServerSymbol;
    return nullptr;
  }
  std::unique_ptr<HttpServer> server(make());
  if (server == nullptr) *error = "out of memory";
  return server;
}

}  // namespace heapprof
