//go:build linux

package file

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// statfsType returns the statfs(2) f_type of dir.
func statfsType(dir string) (uint32, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, err
	}
	// f_type is a 32-bit magic number in a field as wide as a long.
	return uint32(st.Type), nil
}

// networkFS names, by their statfs(2) f_type, the filesystems where
// inotify reports only this host's writes: network filesystems (EFS is
// NFS), FUSE (sshfs, GlusterFS, s3fs, virtiofs, rclone) and the cluster
// filesystems whose other nodes write to shared storage.
var networkFS = map[uint32]string{
	0x6969:     "NFS",
	0x517B:     "SMB",
	0xFE534D42: "SMB2",
	0xFF534D42: "CIFS",
	0x65735546: "FUSE",
	0x00C36400: "Ceph",
	0x01021997: "9P",
	0x5346414F: "AFS",
	0x6B414653: "kAFS",
	0x73757245: "Coda",
	0x564C:     "NCP",
	0x0BD00BD0: "Lustre",
	0x47504653: "GPFS",
	0x19830326: "BeeGFS",
	0x20030528: "OrangeFS",
	0xAAD7AAEA: "PanFS",
	0x01161970: "GFS2",
	0x7461636F: "OCFS2",
	0x786F4256: "vboxsf",
}

// unwatchable says why inotify on dir would miss writes, or "" when it
// sees them all (a local filesystem). fsType, when set, replaces statfs(2).
func unwatchable(dir string, fsType func(string) (uint32, error)) (string, error) {
	if fsType == nil {
		fsType = statfsType
	}
	magic, err := fsType(dir)
	if err != nil {
		return "", err
	}
	name, ok := networkFS[magic]
	if !ok {
		return "", nil
	}
	return fmt.Sprintf("inotify does not report other hosts' writes on %s (the directory %s); "+
		"the standby polls every renew_interval", name, dir), nil
}
