package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/peers"
)

func init() { Register("stacks", newStacksCmd) }

func newStacksCmd(env *Env) *cobra.Command {
	var markdown, check bool
	cmd := &cobra.Command{
		Use:   "stacks [NAME]",
		Short: "List the stacks a plan can choose (server: and client:), or describe one",
		Long: `Lists the registry of stacks: every implementation that can serve or take a
sample (quicbench's own, the peers, the browsers), with its roles, protocols,
the congestion controls it runs over QUIC (the plan's cc when it can choose,
else its own) and what it cannot do. With a NAME, prints that stack's whole
description (peers/NAME/stack.yaml). --check also runs each stack's check (as
quicbench doctor does) and says what is installed here. --markdown prints the
table of docs/peers.md.`,
		Example: `  quicbench stacks
  quicbench stacks --check
  quicbench stacks NAME`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				st, ok := peers.Lookup(args[0])
				if !ok {
					return Usage(fmt.Errorf("no stack %q", args[0]), "stacks: "+strings.Join(stackNames(), ", "))
				}
				describeStack(env.Stdout, st)
				return nil
			}
			if markdown {
				fmt.Fprint(env.Stdout, StacksMarkdown())
				return nil
			}
			listStacks(cmd.Context(), env.Stdout, check)
			return nil
		},
	}
	cmd.Flags().BoolVar(&markdown, "markdown", false, "print the table of docs/peers.md")
	cmd.Flags().BoolVar(&check, "check", false, "run each stack's check: is it installed and working here")
	return cmd
}

func stackNames() []string {
	var out []string
	for _, s := range peers.All() {
		out = append(out, s.Name)
	}
	return out
}

// roleNames says a stack's roles as plans name them.
func roleNames(s *peers.Stack) string {
	var r []string
	if s.Server != nil {
		r = append(r, "server: "+s.Name)
	}
	if s.Client != nil {
		r = append(r, "client: "+s.ClientName())
	}
	return strings.Join(r, ", ")
}

// quicCC says what a role runs over QUIC: "reno (fixed)", "cubic reno
// (plan's; else cubic)".
func quicCC(c peers.CC) string {
	switch {
	case len(c.QUIC) == 0:
		return "–"
	case !c.Selectable():
		return model.CCLabel(c.QUICDefault) + " (fixed)"
	}
	var l []string
	for _, a := range c.QUIC {
		l = append(l, model.CCLabel(a))
	}
	return strings.Join(l, ", ") + " (the plan's; else " + model.CCLabel(c.QUICDefault) + ")"
}

func roleProtocols(s *peers.Stack) []string {
	var ps []string
	if s.Server != nil {
		ps = append(ps, s.Server.Protocols...)
	}
	if s.Client != nil {
		for _, p := range s.Client.Protocols {
			if !slices.Contains(ps, p) {
				ps = append(ps, p)
			}
		}
	}
	return ps
}

func listStacks(ctx context.Context, w io.Writer, check bool) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	head := "STACK\tROLES\tPROTOCOLS\tQUIC CC (server / client)"
	if check {
		head += "\tHERE"
	}
	fmt.Fprintln(tw, head)
	for _, s := range peers.All() {
		var cc []string
		if s.Server != nil {
			cc = append(cc, quicCC(s.Server.CC))
		}
		if s.Client != nil {
			cc = append(cc, quicCC(s.Client.CC))
		}
		line := fmt.Sprintf("%s\t%s\t%s\t%s", s.Name, roleNames(s), strings.Join(roleProtocols(s), " "), strings.Join(cc, " / "))
		if check {
			var here []string
			for _, role := range s.Roles() {
				v, _, err := peers.Check(peers.Deep(ctx), s, role)
				switch {
				case err != nil:
					here = append(here, role+": "+firstLine(err.Error()))
				case v != "":
					here = append(here, role+": "+v)
				default:
					here = append(here, role+": ok")
				}
			}
			line += "\t" + strings.Join(here, "; ")
		}
		fmt.Fprintln(tw, line)
	}
	tw.Flush()
}

func firstLine(s string) string {
	if i := strings.IndexAny(s, ":\n"); i > 0 && i < 80 {
		return s[:i]
	}
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

func describeStack(w io.Writer, s *peers.Stack) {
	fmt.Fprintf(w, "%s: %s\n", s.Name, s.About)
	fmt.Fprintf(w, "  described in  %s\n", s.Origin)
	if s.Version != "" {
		fmt.Fprintf(w, "  version       %s (pinned)\n", s.Version)
	}
	fmt.Fprintf(w, "  install       %s\n", s.Install)
	fmt.Fprintf(w, "  writes        key log: %v, qlog: %v\n", s.KeyLog, s.Qlog)
	if sv := s.Server; sv != nil {
		fmt.Fprintf(w, "  server        %s, %s, port %d, launched as %q\n", s.Name, strings.Join(sv.Protocols, " "), sv.Port, sv.Launch)
		fmt.Fprintf(w, "    QUIC cc     %s: %s\n", quicCC(sv.CC), sv.CC.QUICHow)
		if sv.CC.TCP != "" {
			fmt.Fprintf(w, "    TCP cc      the testbed's: the plan's cc, imposed by its routes\n")
		}
		fmt.Fprintf(w, "    statistics  %s\n", sv.Stats)
		for _, t := range peers.Tests {
			if ok, why, _ := peers.Serves(s.Name, t); !ok {
				fmt.Fprintf(w, "    no %s: %s\n", t, why)
			}
		}
	}
	if c := s.Client; c != nil {
		fmt.Fprintf(w, "  client        %s (%s), %s\n", s.ClientName(), c.Kind, strings.Join(c.Protocols, " "))
		if len(c.Tests) > 0 {
			fmt.Fprintf(w, "    tests       %s\n", strings.Join(c.Tests, " "))
		}
		fmt.Fprintf(w, "    QUIC cc     %s: %s\n", quicCC(c.CC), c.CC.QUICHow)
		fmt.Fprintf(w, "    statistics  %s\n", c.Stats)
		if c.Note != "" {
			fmt.Fprintf(w, "    samples     %s\n", c.Note)
		}
	}
}

// StacksMarkdown is the table of docs/peers.md ("The stacks"), made from the
// registry so that the documentation cannot drift from it.
func StacksMarkdown() string {
	var b strings.Builder
	b.WriteString("| stack | plan names | protocols | QUIC congestion control (server / client) | cannot | statistics |\n")
	b.WriteString("|---|---|---|---|---|---|\n")
	for _, s := range peers.All() {
		var cc, stats, cannot []string
		if sv := s.Server; sv != nil {
			cc = append(cc, quicCC(sv.CC))
			stats = append(stats, "server: "+sv.Stats)
			for _, t := range peers.Tests {
				if ok, _, _ := peers.Serves(s.Name, t); !ok {
					cannot = append(cannot, "serve "+t)
				}
			}
		}
		if c := s.Client; c != nil {
			cc = append(cc, quicCC(c.CC))
			stats = append(stats, "client: "+c.Stats)
			switch c.Kind {
			case peers.KindFetch, peers.KindCommand:
				cannot = append(cannot, "run other tests than "+strings.Join(c.Tests, ", "))
			case peers.KindAudit:
				cannot = append(cannot, "run other tests than page and site")
			case peers.KindBrowser:
				cannot = append(cannot, "run handshake, cpu and fairness")
			}
		}
		if len(cannot) == 0 {
			cannot = []string{"–"}
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s | %s |\n", s.Name, roleNames(s), strings.Join(roleProtocols(s), " "),
			strings.Join(cc, " / "), strings.Join(cannot, "; "), strings.Join(stats, "; "))
	}
	return b.String()
}
