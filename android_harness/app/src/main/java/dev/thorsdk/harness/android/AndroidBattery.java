package dev.thorsdk.harness.android;

import android.content.Context;
import android.content.Intent;
import android.content.IntentFilter;
import android.os.BatteryManager;
import dev.thorsdk.harness.BatteryReader;
import java.io.IOException;

/**
 * Battery readings through the public API: BatteryManager.BATTERY_PROPERTY_CURRENT_NOW (documented as
 * microamps, positive = charging; vendors differ: BatteryPower decides units and sign per window) and
 * the sticky ACTION_BATTERY_CHANGED intent's EXTRA_VOLTAGE (millivolts; refreshed when the battery
 * broadcast fires, i.e. slowly: fine for the ~1 s fuel-gauge rate, and recorded as such).
 */
public final class AndroidBattery implements BatteryReader {
    private final Context context;
    private final BatteryManager bm;

    public AndroidBattery(Context context) {
        this.context = context;
        this.bm = (BatteryManager) context.getSystemService(Context.BATTERY_SERVICE);
    }

    private Intent sticky() {
        return context.registerReceiver(null, new IntentFilter(Intent.ACTION_BATTERY_CHANGED));
    }

    @Override
    public long currentRaw() throws IOException {
        long v = bm.getLongProperty(BatteryManager.BATTERY_PROPERTY_CURRENT_NOW);
        if (v == Long.MIN_VALUE) {
            throw new IOException("this device does not report BATTERY_PROPERTY_CURRENT_NOW");
        }
        return v;
    }

    @Override
    public long voltageRaw() throws IOException {
        Intent i = sticky();
        int mv = i == null ? -1 : i.getIntExtra(BatteryManager.EXTRA_VOLTAGE, -1);
        if (mv <= 0) {
            throw new IOException("no battery voltage in ACTION_BATTERY_CHANGED");
        }
        return mv;
    }

    @Override
    public String externalPower() {
        Intent i = sticky();
        if (i == null) {
            return "";
        }
        int plugged = i.getIntExtra(BatteryManager.EXTRA_PLUGGED, 0);
        if (plugged == 0) {
            return "";
        }
        String how = plugged == BatteryManager.BATTERY_PLUGGED_USB ? "usb"
                : plugged == BatteryManager.BATTERY_PLUGGED_AC ? "ac"
                : plugged == BatteryManager.BATTERY_PLUGGED_WIRELESS ? "wireless" : "external";
        return how + " power is plugged in";
    }
}
