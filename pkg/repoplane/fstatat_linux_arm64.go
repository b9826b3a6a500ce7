package repoplane

import "syscall"

const fstatatTrap = syscall.SYS_FSTATAT
