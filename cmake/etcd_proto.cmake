# Generates C++ for the trimmed etcd v3 protos in src/engine/etcd/proto/ and links gRPC into kvq.
find_package(Protobuf REQUIRED)
find_package(gRPC CONFIG REQUIRED)
find_program(KVQ_GRPC_CPP_PLUGIN grpc_cpp_plugin REQUIRED)
file(GLOB KVQ_ETCD_PROTOS CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/engine/etcd/proto/*.proto)
set(KVQ_PROTO_OUT ${PROJECT_BINARY_DIR}/generated)
file(MAKE_DIRECTORY ${KVQ_PROTO_OUT})
set(KVQ_PROTO_MESSAGE_SRCS)
set(KVQ_PROTO_SERVICE_SRCS)
foreach(proto ${KVQ_ETCD_PROTOS})
  get_filename_component(name ${proto} NAME_WE)
  set(outs ${KVQ_PROTO_OUT}/${name}.pb.cc ${KVQ_PROTO_OUT}/${name}.pb.h
           ${KVQ_PROTO_OUT}/${name}.grpc.pb.cc ${KVQ_PROTO_OUT}/${name}.grpc.pb.h)
  add_custom_command(OUTPUT ${outs}
    COMMAND protobuf::protoc ARGS --proto_path=${PROJECT_SOURCE_DIR}/src/engine/etcd/proto
      --cpp_out=${KVQ_PROTO_OUT} --grpc_out=${KVQ_PROTO_OUT}
      --plugin=protoc-gen-grpc=${KVQ_GRPC_CPP_PLUGIN} ${proto}
    DEPENDS ${proto} VERBATIM)
  list(APPEND KVQ_PROTO_MESSAGE_SRCS ${KVQ_PROTO_OUT}/${name}.pb.cc)
  list(APPEND KVQ_PROTO_SERVICE_SRCS ${KVQ_PROTO_OUT}/${name}.grpc.pb.cc)
endforeach()
# One object library of generated code, a room of the kvq archive.
function(kvq_add_proto_library target)
  add_library(${target} OBJECT ${ARGN})
  target_include_directories(${target} PUBLIC $<BUILD_INTERFACE:${KVQ_PROTO_OUT}>)
  target_link_libraries(${target} PUBLIC gRPC::grpc++ protobuf::libprotobuf)
  set_target_properties(${target} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  target_compile_options(${target} PRIVATE ${KVQ_AROUND_OPTIONS})
  set_property(GLOBAL APPEND PROPERTY KVQ_ROOMS ${target})
endfunction()
# The messages (what the response decoders and their fuzz target need) and the gRPC service stubs,
# which use them.
kvq_add_proto_library(kvq_etcd_messages ${KVQ_PROTO_MESSAGE_SRCS})
kvq_add_proto_library(kvq_etcd_proto ${KVQ_PROTO_SERVICE_SRCS})
target_link_libraries(kvq_etcd_proto PUBLIC kvq_etcd_messages)
# The etcd room includes the generated headers (rpc.pb.h, ...) and links gRPC.
target_include_directories(kvq_etcd PRIVATE ${KVQ_PROTO_OUT})
target_link_libraries(kvq_etcd PRIVATE gRPC::grpc++ protobuf::libprotobuf)
add_dependencies(kvq_etcd kvq_etcd_proto)
