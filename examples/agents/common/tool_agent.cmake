# What a tool agent's CMakeLists.txt includes, whether it is built in the
# minivm tree or on its own against an installed minivm: the shared code
# (vmti_tool_common) and minivm_tool_agent(), which makes the agent's
# lib<name>.so.
include_guard(GLOBAL)
if(NOT TARGET minivm::vmti)
  find_package(minivm REQUIRED)
endif()
if(NOT TARGET vmti_tool_common)
  add_subdirectory(${CMAKE_CURRENT_LIST_DIR} ${CMAKE_CURRENT_BINARY_DIR}/common)
endif()

# A module loaded with -agentlib: lib<name>.so, exporting only what it marks
# VMTI_EXPORT (Agent_OnLoad, Agent_OnUnload).
function(minivm_agent_module target)
  set_target_properties(${target} PROPERTIES PREFIX "lib"
    CXX_STANDARD 17 CXX_STANDARD_REQUIRED ON CXX_EXTENSIONS OFF
    CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON)
endfunction()

# minivm_tool_agent(<name> <source>...): the agent <name> on the shared code.
function(minivm_tool_agent name)
  add_library(${name} MODULE ${ARGN})
  minivm_agent_module(${name})
  target_link_libraries(${name} PRIVATE vmti_tool_common)
endfunction()
