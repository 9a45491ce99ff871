//go:build !linux

package engine

import "errors"

// engineSeesDir: loop devices and ext4 images are Linux's.
func engineSeesDir(sock, dir string) error {
	return errors.New("sized volumes need Linux")
}
