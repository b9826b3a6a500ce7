package fsplane

const sysRenameat2 = 316
