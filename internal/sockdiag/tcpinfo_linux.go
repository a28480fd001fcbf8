package sockdiag

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// tcpInfo copies the kernel's struct tcp_info in b into a unix.TCPInfo:
// the kernel writes it in native layout, as for getsockopt(TCP_INFO); a
// newer kernel's longer struct is cut, an older one's shorter struct
// leaves the missing fields zero.
func tcpInfo(b []byte) *unix.TCPInfo {
	var ti unix.TCPInfo
	copy(unsafe.Slice((*byte)(unsafe.Pointer(&ti)), unsafe.Sizeof(ti)), b)
	return &ti
}
