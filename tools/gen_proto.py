"""Generate the Python gRPC stubs for proto/eoslab/v1/*.proto into OUT (default: the repo root).

The stubs land in eoslab/v1/ as *_pb2.py, *_pb2.pyi and *_pb2_grpc.py. The
test tests/test_proto_stubs.py runs this into a temporary folder and checks
that the committed stubs are byte-for-byte current.
"""
import pathlib
import sys

from grpc_tools import protoc

ROOT = pathlib.Path(__file__).resolve().parent.parent


def generate(out: pathlib.Path) -> None:
    proto_dir = ROOT / "proto"
    files = sorted(str(p.relative_to(proto_dir)) for p in (proto_dir / "eoslab" / "v1").glob("*.proto"))
    include = pathlib.Path(protoc.__file__).parent / "_proto"
    args = ["protoc", f"-I{proto_dir}", f"-I{include}", f"--python_out={out}",
            f"--pyi_out={out}", f"--grpc_python_out={out}", *files]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed")


if __name__ == "__main__":
    generate(pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT)
