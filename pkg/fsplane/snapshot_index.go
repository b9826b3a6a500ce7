package fsplane

import "github.com/sharedos/sharedos/pkg/kernel"

// The snapshot index port lives in the kernel (kernel.SnapshotIndex), so that a store
// implementing it need not import a plane. These aliases keep the plane's own names.
type (
	// SnapshotEntry is kernel.SnapshotEntry.
	SnapshotEntry = kernel.SnapshotEntry
	// SnapshotScope is kernel.SnapshotScope.
	SnapshotScope = kernel.SnapshotScope
	// SnapshotRecord is kernel.SnapshotRecord.
	SnapshotRecord = kernel.SnapshotRecord
	// SnapshotIndex is kernel.SnapshotIndex.
	SnapshotIndex = kernel.SnapshotIndex
)

// snapshotScope is the scope the snapshots of path taken or seen by op belong to: the
// world and owner of its context (the resource's owner when the operation names one),
// this root, and path.
func (p *Provider) snapshotScope(op kernel.ResourceOperation, path []string) SnapshotScope {
	owner := op.Context.Owner
	if op.Resource.Owner != nil {
		owner = *op.Resource.Owner
	}
	return SnapshotScope{World: op.Context.World, Owner: owner, Root: p.rootPath, Path: clonePath(path)}
}
