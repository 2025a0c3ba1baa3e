import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.FileTime;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.TreeSet;
import java.util.stream.Stream;
import javax.xml.parsers.DocumentBuilderFactory;
import org.w3c.dom.Element;
import org.w3c.dom.NodeList;

/**
 * Fails a test tier that ran fewer tests than its manifest lists.
 *
 * <p>Surefire and failsafe fail only when a pattern selects nothing: a test class renamed out
 * of a pom's list, a method renamed in Pulsar's suite, an execution that stopped selecting
 * pass silently. So each tier lists, in {@code tiers/<tier>.tests}, every test it must run, by
 * its report directory, class and name, and this check (the build's last module, at
 * {@code verify}) reads the reports this build wrote and names each listed test that did not
 * run (absent, or skipped). A test that ran but is not listed is reported without failing (a
 * test that runs only where Docker exists, or one just added: add it with {@code --write}).
 *
 * <p>Usage: {@code java tiers/CheckTier.java <quick|full> <root> [<build start, ISO-8601>]
 * [--write]}; reports older than the build's start are not this build's and are ignored.
 */
public final class CheckTier {

    private CheckTier() {
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 2) {
            System.err.println("usage: java CheckTier.java <tier> <root> [<build start>] [--write]");
            System.exit(2);
        }
        String tier = args[0];
        Path root = Path.of(args[1]);
        boolean write = List.of(args).contains("--write");
        Instant start = args.length > 2 && !args[2].equals("--write") && !args[2].isBlank()
                ? Instant.parse(args[2]).minusSeconds(5) : Instant.EPOCH;
        Path manifest = root.resolve("tiers").resolve(tier + ".tests");

        TreeSet<String> ran = new TreeSet<>();
        for (Path reports : reportDirectories(root)) {
            ran.addAll(testsThatRan(root, reports, start));
        }
        if (write) {
            List<String> lines = new ArrayList<>();
            lines.add("# Every test the " + tier + " tier must run: <report directory> <class> <name>.");
            lines.add("# Checked by tiers/CheckTier.java at the end of the build; written by its --write.");
            lines.addAll(ran);
            Files.write(manifest, lines);
            System.out.println("Wrote " + ran.size() + " tests to " + root.relativize(manifest));
            return;
        }
        TreeSet<String> listed = new TreeSet<>();
        for (String line : Files.readAllLines(manifest)) {
            if (!line.isBlank() && !line.startsWith("#")) {
                listed.add(line.strip());
            }
        }
        TreeSet<String> missing = new TreeSet<>(listed);
        missing.removeAll(ran);
        TreeSet<String> unlisted = new TreeSet<>(ran);
        unlisted.removeAll(listed);
        for (String test : unlisted) {
            System.out.println("[tier " + tier + "] ran, not in " + root.relativize(manifest) + ": " + test);
        }
        if (!missing.isEmpty()) {
            System.err.println("[tier " + tier + "] " + missing.size() + " of the " + listed.size()
                    + " tests " + root.relativize(manifest) + " lists did not run (absent or skipped):");
            missing.forEach(test -> System.err.println("  " + test));
            System.err.println("A test renamed or moved: update the manifest (java tiers/CheckTier.java "
                    + tier + " . --write, after a whole run of the tier).");
            System.exit(1);
        }
        System.out.println("[tier " + tier + "] all " + listed.size() + " listed tests ran ("
                + unlisted.size() + " more ran, not listed)");
    }

    /** Every surefire or failsafe report directory under a module's target. */
    private static List<Path> reportDirectories(Path root) throws IOException {
        try (Stream<Path> paths = Files.find(root, 5, (path, attributes) -> attributes.isDirectory()
                && path.getParent() != null && path.getParent().getFileName() != null
                && path.getParent().getFileName().toString().equals("target")
                && path.getFileName().toString().matches("(surefire|failsafe)-reports.*"))) {
            return paths.sorted().toList();
        }
    }

    /** The tests a report directory says ran (not skipped), as manifest lines. */
    private static List<String> testsThatRan(Path root, Path reports, Instant start) throws Exception {
        List<String> tests = new ArrayList<>();
        String directory = root.relativize(reports).toString().replace('\\', '/').replace("/target/", "/");
        List<Path> files;
        try (Stream<Path> list = Files.list(reports)) {
            files = list.filter(file -> file.getFileName().toString().matches("TEST-.*\\.xml")).sorted().toList();
        }
        for (Path file : files) {
            if (Files.getLastModifiedTime(file).compareTo(FileTime.from(start)) < 0) {
                continue;
            }
            NodeList cases = DocumentBuilderFactory.newInstance().newDocumentBuilder().parse(file.toFile())
                    .getElementsByTagName("testcase");
            for (int i = 0; i < cases.getLength(); i++) {
                Element testcase = (Element) cases.item(i);
                if (testcase.getElementsByTagName("skipped").getLength() > 0) {
                    continue;
                }
                tests.add(directory + " " + testcase.getAttribute("classname") + " "
                        + testcase.getAttribute("name").replace('\n', ' '));
            }
        }
        return tests;
    }
}
