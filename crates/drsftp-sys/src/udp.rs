//! UDP batching: sendmmsg/recvmmsg and UDP GSO/GRO where the kernel has them.
