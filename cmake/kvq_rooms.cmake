# One CMake object library per folder ("room") of src/, so that the direction of dependency is
# enforced by the build: a room compiles against an include root (in the build tree) that holds
# only its own headers and those of the rooms it may use, so an include against the direction
# fails to compile. docs/architecture.md has the map; scripts/check-style.sh checks the same rule
# textually.
#
# kvq_add_room(NAME FOLDER [USES folder...])
#   NAME     target name (kvq_<room>)
#   FOLDER   the room's folder relative to src/ (its *.cc files are the library's sources)
#   USES     folders relative to src/ whose headers the room may include (rooms below it)
function(kvq_add_room name folder)
  cmake_parse_arguments(ROOM "" "" "USES" ${ARGN})
  file(GLOB sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/${folder}/*.cc)
  add_library(${name} OBJECT ${sources})
  set(root ${PROJECT_BINARY_DIR}/include_roots/${name})
  file(REMOVE_RECURSE ${root})
  foreach(allowed ${folder} ${ROOM_USES})
    file(GLOB headers CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/${allowed}/*.h)
    file(MAKE_DIRECTORY ${root}/${allowed})
    foreach(header ${headers})
      get_filename_component(header_name ${header} NAME)
      file(CREATE_LINK ${header} ${root}/${allowed}/${header_name} SYMBOLIC)
    endforeach()
  endforeach()
  target_include_directories(${name} PRIVATE ${root}
    PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>)
  target_compile_options(${name} PRIVATE ${KVQ_WARNINGS})
  target_link_libraries(${name} PUBLIC Threads::Threads)
  set_target_properties(${name} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  if(KVQ_UNITY)
    set_target_properties(${name} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE ${KVQ_UNITY_BATCH})
  endif()
  set_property(GLOBAL APPEND PROPERTY KVQ_ROOMS ${name})
endfunction()

# Defines KVQ_WITH_ROCKSDB=1 / KVQ_WITH_ETCD=1 on `target` (with `scope`: PRIVATE, PUBLIC) for the
# engines this build has, so code can dispatch on them.
function(kvq_define_engines target scope)
  if(KVQ_WITH_ROCKSDB)
    target_compile_definitions(${target} ${scope} KVQ_WITH_ROCKSDB=1)
  endif()
  if(KVQ_WITH_ETCD)
    target_compile_definitions(${target} ${scope} KVQ_WITH_ETCD=1)
  endif()
endfunction()
