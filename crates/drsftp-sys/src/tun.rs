//! TUN devices: open, configure (IFF_TUN, IFF_NO_PI, IFF_VNET_HDR, offloads), batch read and write.
