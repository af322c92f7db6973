package dev.thorsdk.harness;

import java.io.File;
import java.util.Arrays;
import java.util.Comparator;

final class Arrays2 {
    private Arrays2() {}

    static void sortByName(File[] files) {
        Arrays.sort(files, Comparator.comparing(File::getName));
    }
}
