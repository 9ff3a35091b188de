"""Generated gRPC stubs for strata.v1 (scripts/genpy.sh; do not edit)."""
