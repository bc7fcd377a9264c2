package k8stest

import (
	"context"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

// localProvisioner names the harness's provisioner on the StorageClass and
// on the PersistentVolumes it creates.
const localProvisioner = "oce.dev/k8stest-local"

// startProvisioner creates the default WaitForFirstConsumer StorageClass
// and runs, in the test process, a provisioner for it: once the scheduler
// has picked the node for a claim it creates a directory under Dir/pv and a
// local PersistentVolume bound to the claim (kubelet applies fsGroup to
// local volumes); a Released volume is deleted with its directory.
func (c *Cluster) startProvisioner(ctx context.Context) error {
	sc := &storagev1.StorageClass{
		ObjectMeta: metav1.ObjectMeta{Name: LocalStorageClass,
			Annotations: map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}},
		Provisioner:       localProvisioner,
		ReclaimPolicy:     ptrTo(corev1.PersistentVolumeReclaimDelete),
		VolumeBindingMode: ptrTo(storagev1.VolumeBindingWaitForFirstConsumer),
	}
	if _, err := c.Client.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	pctx, cancel := context.WithCancel(context.Background())
	c.provision, c.provDone = cancel, make(chan struct{})
	f := informers.NewSharedInformerFactory(c.Client, 30*time.Second)
	claims, vols := f.Core().V1().PersistentVolumeClaims().Informer(), f.Core().V1().PersistentVolumes().Informer()
	work := make(chan struct{}, 1)
	kick := func(any) {
		select {
		case work <- struct{}{}:
		default:
		}
	}
	h := cache.ResourceEventHandlerFuncs{AddFunc: kick, UpdateFunc: func(_, n any) { kick(n) }, DeleteFunc: kick}
	if _, err := claims.AddEventHandler(h); err != nil {
		cancel()
		return err
	}
	if _, err := vols.AddEventHandler(h); err != nil {
		cancel()
		return err
	}
	f.Start(pctx.Done())
	go func() {
		defer close(c.provDone)
		defer f.Shutdown()
		for {
			select {
			case <-pctx.Done():
				return
			case <-work:
			}
			c.provisionOnce(pctx, claims.GetStore(), vols.GetStore())
		}
	}()
	return nil
}

// provisionOnce binds every waiting claim of the class and deletes every
// Released volume of the provisioner.
func (c *Cluster) provisionOnce(ctx context.Context, claims, vols cache.Store) {
	for _, o := range claims.List() {
		pvc := o.(*corev1.PersistentVolumeClaim)
		if pvc.Status.Phase != corev1.ClaimPending || pvc.Spec.VolumeName != "" || pvc.DeletionTimestamp != nil ||
			pvc.Spec.StorageClassName == nil || *pvc.Spec.StorageClassName != LocalStorageClass ||
			pvc.Annotations["volume.kubernetes.io/selected-node"] != RealNodeName {
			continue
		}
		name := "pv-" + string(pvc.UID)
		dir := filepath.Join(c.Dir, "pv", name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			continue
		}
		pv := &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{"pv.kubernetes.io/provisioned-by": localProvisioner}},
			Spec: corev1.PersistentVolumeSpec{
				Capacity:                      corev1.ResourceList{corev1.ResourceStorage: pvc.Spec.Resources.Requests[corev1.ResourceStorage]},
				AccessModes:                   pvc.Spec.AccessModes,
				PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
				StorageClassName:              LocalStorageClass,
				VolumeMode:                    ptrTo(corev1.PersistentVolumeFilesystem),
				ClaimRef: &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1",
					Namespace: pvc.Namespace, Name: pvc.Name, UID: pvc.UID},
				PersistentVolumeSource: corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: dir}},
				NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
					MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "kubernetes.io/hostname",
						Operator: corev1.NodeSelectorOpIn, Values: []string{RealNodeName}}}}}}},
			},
		}
		_, _ = c.Client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{})
	}
	for _, o := range vols.List() {
		pv := o.(*corev1.PersistentVolume)
		if pv.Annotations["pv.kubernetes.io/provisioned-by"] != localProvisioner || pv.Status.Phase != corev1.VolumeReleased {
			continue
		}
		if pv.Spec.Local != nil {
			_ = os.RemoveAll(pv.Spec.Local.Path)
		}
		_ = c.Client.CoreV1().PersistentVolumes().Delete(ctx, pv.Name, metav1.DeleteOptions{})
	}
}
