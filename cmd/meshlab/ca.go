package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/meshlab/meshlab/api"
)

// newCACmd returns `meshlab ca`: the lab CA's status, root rotation, clock offset and
// pausing an agent's renewal.
func newCACmd(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "ca",
		Short: "The lab's certificate authority: status, root rotation, clock offset, renewal pause",
	}
	cmd.AddCommand(newCAStatusCmd(g), newCARotateCmd(g), newCAClockCmd(g), newCARenewalCmd(g))
	return cmd
}

func newCAStatusCmd(g *globalFlags) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:           "status",
		Short:         "Show the trust bundle, the signing root and each pod's certificate",
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return queryLab(cmd, g, output, func(ctx context.Context, c *api.Client) (api.CAStatus, error) { return c.CAStatus(ctx) },
				func(w io.Writer, st api.CAStatus) error { return printCAStatusText(w, st, time.Now()) })
		},
	}
	addOutputFlag(cmd, &output)
	return cmd
}

// rotateRootResult is what `meshlab ca rotate-root -o json|yaml` prints.
type rotateRootResult struct {
	Root        string       `json:"root"`     // serial of the new signing root
	Duration    string       `json:"duration"` // how long the rotation took
	PodsRenewed int          `json:"podsRenewed"`
	Status      api.CAStatus `json:"status"` // the CA after the rotation
}

func newCARotateCmd(g *globalFlags) *cobra.Command {
	var certPath, keyPath, output string
	cmd := &cobra.Command{
		Use:   "rotate-root",
		Short: "Rotate the lab's root CA without breaking mTLS (cross-signed, Istio-style)",
		Long: `Rotates the lab's root in three steps, waiting for every agent after each:
  1. the new root joins the trust bundle (cross-signed by the old) and every agent
     renews, so that it trusts both;
  2. the new root signs; certificates are sent with the cross-signed new root, so a
     peer that trusts only the old root still accepts them; every agent renews;
  3. the old root leaves the bundle; every agent renews.
A lab started with --ca-cert/--ca-key needs the new root as --new-ca-cert/--new-ca-key.`,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			if (certPath == "") != (keyPath == "") {
				return fmt.Errorf("--new-ca-cert and --new-ca-key go together")
			}
			var certPEM, keyPEM []byte
			if certPath != "" {
				var err error
				if certPEM, err = os.ReadFile(certPath); err != nil {
					return fmt.Errorf("read --new-ca-cert: %w", err)
				}
				if keyPEM, err = os.ReadFile(keyPath); err != nil {
					return fmt.Errorf("read --new-ca-key: %w", err)
				}
			}
			c, err := g.apiClient()
			if err != nil {
				return err
			}
			defer c.Close()
			start := time.Now()
			st, err := c.RotateRoot(cmd.Context(), certPEM, keyPEM)
			if err != nil {
				return err
			}
			r := rotateRootResult{Root: st.Signing.Serial, Duration: time.Since(start).Round(time.Millisecond).String(), PodsRenewed: len(st.Pods), Status: st}
			return printOutput(cmd.OutOrStdout(), output, r, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "root rotated to %s in %s; %d pods renewed\n", r.Root, r.Duration, r.PodsRenewed)
				return err
			})
		},
	}
	addOutputFlag(cmd, &output)
	cmd.Flags().StringVar(&certPath, "new-ca-cert", "", "the new root certificate (PEM); required when the lab's root was supplied")
	cmd.Flags().StringVar(&keyPath, "new-ca-key", "", "the new root's private key (PEM, ECDSA)")
	return cmd
}

// caClockResult is what `meshlab ca clock -o json|yaml` prints.
type caClockResult struct {
	Offset  string       `json:"offset"`  // the CA clock's offset now
	Renewed bool         `json:"renewed"` // whether the agents were asked to renew
	Status  api.CAStatus `json:"status"`  // the CA after the change
}

func newCAClockCmd(g *globalFlags) *cobra.Command {
	var (
		offset  time.Duration
		reset   bool
		noRenew bool
		output  string
	)
	cmd := &cobra.Command{
		Use:   "clock",
		Short: "Shift the CA's clock (fault injection): --offset -25h issues already expired certificates",
		Long: `Shifts the CA's notion of now for the certificates it issues: with --offset -25h a
24h certificate is expired when issued, with --offset 1h it is not yet valid. Every
agent (except paused ones) renews at once unless --no-renew. --reset sets it back.`,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			if reset == cmd.Flags().Changed("offset") {
				return fmt.Errorf("give one of --offset and --reset")
			}
			if reset {
				offset = 0
			}
			c, err := g.apiClient()
			if err != nil {
				return err
			}
			defer c.Close()
			st, err := c.SetCAClock(cmd.Context(), offset, !noRenew)
			if err != nil {
				return err
			}
			r := caClockResult{Offset: offset.String(), Renewed: !noRenew, Status: st}
			return printOutput(cmd.OutOrStdout(), output, r, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "CA clock offset %s\n", r.Offset)
				return err
			})
		},
	}
	addOutputFlag(cmd, &output)
	cmd.Flags().DurationVar(&offset, "offset", 0, "shift the CA's clock by this much (e.g. -25h)")
	cmd.Flags().BoolVar(&reset, "reset", false, "set the offset back to 0")
	cmd.Flags().BoolVar(&noRenew, "no-renew", false, "do not have the agents renew now")
	return cmd
}

func newCARenewalCmd(g *globalFlags) *cobra.Command {
	var pause, resume bool
	cmd := &cobra.Command{
		Use:               "renewal POD --pause|--resume",
		Short:             "Pause or resume a pod agent's certificate renewal (so that its certificate expires)",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completePods(g, true),
		SilenceUsage:      true,
		SilenceErrors:     true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if pause == resume {
				return fmt.Errorf("give one of --pause and --resume")
			}
			_, key, err := g.podPaths(args[0], true)
			if err != nil {
				return err
			}
			args[0] = key // the pod's key names it to the lab even where its name repeats
			c, err := g.apiClient()
			if err != nil {
				return err
			}
			defer c.Close()
			if err := c.PauseCertRenewal(cmd.Context(), args[0], pause); err != nil {
				return err
			}
			verb := "resumed"
			if pause {
				verb = "paused"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "pod %s: certificate renewal %s\n", args[0], verb)
			return nil
		},
	}
	cmd.Flags().BoolVar(&pause, "pause", false, "stop renewing")
	cmd.Flags().BoolVar(&resume, "resume", false, "renew again")
	return cmd
}

// printCAStatusText writes st as tables.
func printCAStatusText(w io.Writer, st api.CAStatus, now time.Time) error {
	fmt.Fprintf(w, "Trust domain:\t%s\nPhase:\t%s\n", st.TrustDomain, st.Phase)
	if st.ClockOffset != "0s" && st.ClockOffset != "" {
		fmt.Fprintf(w, "Clock offset:\t%s\n", st.ClockOffset)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "\nROOT\tSUBJECT\tNOT AFTER\tSIGNING")
	for _, r := range st.Bundle {
		signing := ""
		if r.Signing {
			signing = "yes"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Serial, r.Subject, r.NotAfter.UTC().Format(time.RFC3339), signing)
	}
	if st.CrossSigned != nil {
		fmt.Fprintf(tw, "%s\t%s (cross-signed)\t%s\t\n", st.CrossSigned.Serial, st.CrossSigned.Subject, st.CrossSigned.NotAfter.UTC().Format(time.RFC3339))
	}
	fmt.Fprintln(tw, "\nPOD\tSERIAL\tISSUING ROOT\tEXPIRES IN\tTRUSTS")
	for _, p := range st.Pods {
		exp := "-"
		if !p.NotAfter.IsZero() {
			exp = p.NotAfter.Sub(now).Round(time.Second).String()
		}
		trusts := fmt.Sprint(p.Bundle)
		if p.Paused {
			trusts += " (renewal paused)"
		}
		if p.Error != "" {
			trusts += " error: " + p.Error
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", p.Pod, p.Serial, p.IssuingRoot, exp, trusts)
	}
	return tw.Flush()
}
