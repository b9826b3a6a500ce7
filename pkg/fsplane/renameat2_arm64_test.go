package fsplane

const sysRenameat2 = 276
