# Generates C++ for the trimmed etcd v3 protos in src/engine/etcd/proto/ and links gRPC into kvq.
find_package(Protobuf REQUIRED)
find_package(gRPC CONFIG REQUIRED)
find_program(KVQ_GRPC_CPP_PLUGIN grpc_cpp_plugin REQUIRED)
file(GLOB KVQ_ETCD_PROTOS CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/engine/etcd/proto/*.proto)
set(KVQ_PROTO_OUT ${PROJECT_BINARY_DIR}/generated)
file(MAKE_DIRECTORY ${KVQ_PROTO_OUT})
set(KVQ_PROTO_SRCS)
foreach(proto ${KVQ_ETCD_PROTOS})
  get_filename_component(name ${proto} NAME_WE)
  set(outs ${KVQ_PROTO_OUT}/${name}.pb.cc ${KVQ_PROTO_OUT}/${name}.pb.h
           ${KVQ_PROTO_OUT}/${name}.grpc.pb.cc ${KVQ_PROTO_OUT}/${name}.grpc.pb.h)
  add_custom_command(OUTPUT ${outs}
    COMMAND protobuf::protoc ARGS --proto_path=${PROJECT_SOURCE_DIR}/src/engine/etcd/proto
      --cpp_out=${KVQ_PROTO_OUT} --grpc_out=${KVQ_PROTO_OUT}
      --plugin=protoc-gen-grpc=${KVQ_GRPC_CPP_PLUGIN} ${proto}
    DEPENDS ${proto} VERBATIM)
  list(APPEND KVQ_PROTO_SRCS ${KVQ_PROTO_OUT}/${name}.pb.cc ${KVQ_PROTO_OUT}/${name}.grpc.pb.cc)
endforeach()
if(KVQ_PROTO_SRCS)
  add_library(kvq_etcd_proto OBJECT ${KVQ_PROTO_SRCS})
  target_include_directories(kvq_etcd_proto PUBLIC $<BUILD_INTERFACE:${KVQ_PROTO_OUT}>)
  target_link_libraries(kvq_etcd_proto PUBLIC gRPC::grpc++ protobuf::libprotobuf)
  set_target_properties(kvq_etcd_proto PROPERTIES POSITION_INDEPENDENT_CODE ON)
  target_compile_options(kvq_etcd_proto PRIVATE ${KVQ_AROUND_OPTIONS})
  set_property(GLOBAL APPEND PROPERTY KVQ_ROOMS kvq_etcd_proto)
endif()
# The etcd room includes the generated headers (rpc.pb.h, ...) and links gRPC.
target_include_directories(kvq_etcd PRIVATE ${KVQ_PROTO_OUT})
target_link_libraries(kvq_etcd PRIVATE gRPC::grpc++ protobuf::libprotobuf)
add_dependencies(kvq_etcd kvq_etcd_proto)
