package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"oce.dev/oce/coordinator/certs"
)

// certsCommand is `coordinator certs`: a CA and the members' serving
// certificate for the deploy bundle, naming certs.InstallHosts.
func certsCommand() *cobra.Command {
	var namespace, out string
	var extra []string
	var force bool
	cmd := &cobra.Command{
		Use:   "certs --out DIR",
		Short: "Write a CA and the serving certificate of a Kubernetes install (the Secret oce-coordinator-tls)",
		Long: "Writes ca.crt, ca.key, tls.crt and tls.key (each mode 0600) to DIR: a new CA and one certificate,\n" +
			"server and client auth, naming every address the deploy bundle in NAMESPACE is dialed by — the\n" +
			"members' stable names, the API Service in each form, and localhost, 127.0.0.1 and ::1 for a\n" +
			"kubectl port-forward. Existing files are refused unless --force. Keep ca.key off the cluster.",
		Example: "  coordinator certs --namespace oce-system --out ./oce-tls\n" +
			"  kubectl -n oce-system create secret generic oce-coordinator-tls \\\n" +
			"    --from-file=./oce-tls/ca.crt --from-file=./oce-tls/tls.crt --from-file=./oce-tls/tls.key",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			err := writeCerts(cmd.OutOrStdout(), namespace, out, extra, force)
			if err != nil {
				fmt.Fprintf(cmd.ErrOrStderr(), "coordinator certs: %s: %v\n", certs.Code(err), err)
			}
			return err
		},
	}
	cmd.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		fmt.Fprintf(cmd.ErrOrStderr(), "coordinator certs: INVALID_REQUEST: %v\n", err)
		return err
	})
	f := cmd.Flags()
	f.StringVar(&namespace, "namespace", certs.DefaultNamespace, "the namespace the bundle is installed in")
	f.StringVar(&out, "out", "", "directory to write the four files to (created 0700 when missing)")
	f.StringSliceVar(&extra, "extra-host", nil, "another DNS name or IP address users dial (an ingress or load balancer); repeatable")
	f.BoolVar(&force, "force", false, "replace files already in --out (a new CA: clients must trust the new ca.crt)")
	return cmd
}

func writeCerts(w io.Writer, namespace, out string, extra []string, force bool) error {
	if out == "" {
		return fmt.Errorf("%w: --out DIR is required", certs.ErrInvalidInput)
	}
	in, err := certs.NewInstall(namespace, extra, time.Now())
	if err != nil {
		return err
	}
	f, err := certs.WriteInstall(out, in, force)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "wrote %s, %s, %s, %s\nnames: %s\ncreate the Secret:\n"+
		"  kubectl -n %s create secret generic oce-coordinator-tls --from-file=%s --from-file=%s --from-file=%s\n",
		f.CA, f.CAKey, f.Cert, f.Key, strings.Join(in.Hosts, ", "), namespace, f.CA, f.Cert, f.Key)
	return nil
}
