"""The private descriptor pool of nbinfer's generated stubs. DO NOT EDIT!

Written by scripts/gen_protos.py. tritonclient and kserve define the same ``inference.*``
messages in protobuf's default pool, which refuses a second, different definition of a name;
nbinfer's messages live here instead, so all of them can be imported in one process.
"""

from google.protobuf import descriptor_pool

POOL = descriptor_pool.DescriptorPool()
