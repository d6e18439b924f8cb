"""The public gRPC API (proto/mtpserve.proto): generated stubs (mtpserve_pb2, mtpserve_pb2_grpc,
made by scripts/gen_proto.sh), the asyncio server (server.py) and, in mtpserve.grpc_client, the
Python clients."""
